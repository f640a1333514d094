"""Alice's two small optimizations per round (GAL Algorithm 1).

- :func:`assistance_weights`: ``ŵ = argmin_{w ∈ simplex} E ℓ(r, Σ_m w_m f_m)`` with ``w = softmax(θ)``,
  θ initialised to ones, ``torch.optim.Adam`` (lr 0.1, weight decay 5e-4), 100 full-batch steps; for ℓ₂ on the
  M × M Gram matrix of the outputs (in float64).
- :func:`line_search`: ``η̂ = argmin_η E L₁(y, F + η f)`` by ``torch.optim.LBFGS`` (lr 1, its strong-Wolfe line
  search), η from 1, 10 steps, in float64. It never returns an η whose loss is above the loss at η = 0.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from vcl.engine.losses import local_loss
from vcl.engine.tasks import Task


def assistance_weights(
    outputs: Tensor, residual: Tensor, loss: str, steps: int = 100, lr: float = 0.1, weight_decay: float = 5e-4
) -> Tensor:
    """Weights on the probability simplex for the M organizations' outputs (M, N, K)."""
    m = outputs.shape[0]
    if m == 1:
        return torch.ones(1, device=outputs.device)
    outputs = outputs.detach()
    if loss == "l2":
        return _l2_weights(outputs, residual.detach(), steps, lr, weight_decay).to(outputs.device)
    theta = torch.ones(m, device=outputs.device, requires_grad=True)
    opt = torch.optim.Adam([theta], lr=lr, weight_decay=weight_decay)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        combined = torch.einsum("m,mnk->nk", torch.softmax(theta, 0), outputs)
        local_loss(combined, residual, loss).backward()
        opt.step()
    return torch.softmax(theta.detach(), 0)


def _l2_weights(outputs: Tensor, residual: Tensor, steps: int, lr: float, weight_decay: float) -> Tensor:
    """The ℓ₂ case: ``E ℓ₂(r, Σ w_m f_m) = (wᵀGw − 2wᵀc + rᵀr) / NK`` with the Gram matrix ``G = [f_m · f_m']``
    and ``c = [f_m · r]``, computed once (two matrix products on the outputs as they lie, no copy of them); then
    torch's Adam on θ in float64 with that expression's gradient in closed form, ``(2/NK)(Gw − c)`` through the
    softmax: M numbers a step instead of M·N·K, and no graph to build for them."""
    m = outputs.shape[0]
    flat = outputs.reshape(m, -1)  # a view (the outputs are one block): nothing of size M × N × K is made
    gram = (flat @ flat.T).double().cpu()
    c = (flat @ residual.reshape(-1).to(outputs.dtype)).double().cpu()
    scale = 2.0 / flat.shape[1]
    theta = torch.ones(m, dtype=torch.float64)
    opt = torch.optim.Adam([theta], lr=lr, weight_decay=weight_decay)
    for _ in range(steps):
        w = torch.softmax(theta, 0)
        g = (gram @ w - c) * scale  # ∂loss/∂w
        theta.grad = w * (g - w @ g)  # through the softmax (Adam adds the weight decay)
        opt.step()
    return torch.softmax(theta, 0).float()


def line_search(task: Task, F: Tensor, direction: Tensor, y: Tensor, steps: int = 10, init: float = 1.0) -> float:
    """The assisted learning rate η̂ minimizing Alice's task loss along ``direction``: L-BFGS's iterations on the
    number η (``torch.optim.LBFGS`` with ``line_search_fn="strong_wolfe"``) over the loss along the line in float64
    (:meth:`Task.along`, which gives the loss and its slope). Without the Wolfe search (the authors' call) L-BFGS
    stalls where the line is flat: it drops every curvature pair with s·y ≤ 1e-10, so each step is the slope itself
    (~1e-3) and 200 evaluations move η by 0.2 (departure: gal-line-search)."""
    along = task.along(F, direction, y)
    tried: list[tuple[float, float]] = []  # (loss, η) at every point L-BFGS evaluated

    def fun(eta: float) -> tuple[float, float]:
        loss, slope = along(eta) if math.isfinite(eta) else (math.nan, math.nan)
        tried.append((loss, eta))
        return loss, slope

    eta = torch.tensor([float(init)], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([eta], lr=1.0, line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        loss, slope = fun(eta.item())
        eta.grad = torch.tensor([slope], dtype=torch.float64)
        return torch.tensor(loss, dtype=torch.float64)

    for _ in range(steps):
        opt.step(closure)
    found = eta.item()
    no_step, stepped = along(0.0)[0], along(found)[0]
    # L-BFGS can overshoot on a non-smooth loss (L1) and end worse than where it passed: keep the best
    # point it evaluated, and never one worse than no step at all.
    candidates = [(loss, e) for loss, e in [*tried, (stepped, found)] if math.isfinite(loss)]
    best_loss, best = min(candidates, default=(math.inf, 0.0))
    return best if best_loss <= no_step else 0.0
