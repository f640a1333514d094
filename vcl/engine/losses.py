"""Local (residual-fitting) losses shared by every learner: ``l1``, ``l1.5``, ``l2``, ``l4`` are
``ℓ_q(y, ŷ) = |y − ŷ|^q`` averaged over outputs (GAL Section 4.5); ``ce`` is cross-entropy against (soft) class
targets, for a learner trained on the labels themselves (Late fusion, Joint)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from vcl.errors import VCLInputError

LOCAL_LOSSES = ("l1", "l1.5", "l2", "l4", "ce")


def check_local_loss(name: str, where: str = "local_loss") -> str:
    if name not in LOCAL_LOSSES:
        raise VCLInputError(f"{where}={name!r} is not a local loss; use one of {', '.join(LOCAL_LOSSES)}.")
    return name


def loss_exponent(name: str) -> float:
    """q of ``ℓ_q`` for a local-loss name (``l1.5`` → 1.5)."""
    return float(name[1:])


def local_loss(pred: Tensor, target: Tensor, name: str, sample_weight: Tensor | None = None) -> Tensor:
    """Per-sample local loss, then the (sample-weighted) mean over samples; ``pred`` and ``target`` (..., N, K). A
    leading batch dimension (concurrent organizations) gives one loss each, summed so their gradients stay apart."""
    return local_losses(pred, target, name, sample_weight).sum()


def local_losses(pred: Tensor, target: Tensor, name: str, sample_weight: Tensor | None = None) -> Tensor:
    """:func:`local_loss` of each model of a leading batch dimension, (...,) (a scalar for (N, K))."""
    if name == "ce":
        per_sample = -(target * F.log_softmax(pred, dim=-1)).sum(-1)
    else:
        q, diff = loss_exponent(name), pred - target
        per_sample = (diff.square() if q == 2.0 else diff.abs() if q == 1.0 else diff.abs().pow(q)).mean(-1)
    if sample_weight is None:
        per_model = per_sample.mean(-1)
    else:
        per_model = (per_sample * sample_weight).sum(-1) / sample_weight.sum(-1).clamp_min(1e-12)
    return per_model


def local_loss_grad(pred: Tensor, target: Tensor, name: str, sample_weight: Tensor | None = None) -> Tensor:
    """∂ :func:`local_loss` / ∂ ``pred`` in closed form: what autograd computes, to float rounding (tested), in a
    few operations (a linear learner's step needs no autograd graph; :class:`vcl.engine.linear.LinearSteps`)."""
    if sample_weight is None:
        per_row: Tensor | float = 1.0 / pred.shape[-2]
    else:
        per_row = (sample_weight / sample_weight.sum(-1, keepdim=True).clamp_min(1e-12)).unsqueeze(-1)
    if name == "ce":
        return (torch.softmax(pred, -1) * target.sum(-1, keepdim=True) - target).mul_(per_row)
    q, diff, scale = loss_exponent(name), pred - target, per_row / pred.shape[-1]
    if q == 1.0:
        return diff.sign_().mul_(scale)
    if q == 2.0:
        return diff.mul_(scale * 2.0)
    return diff.abs().pow_(q - 1).mul_(diff.sign()).mul_(scale * q)  # q·|d|^(q−1)·sign(d)


def one_hot(labels: Tensor, num_classes: int) -> Tensor:
    return torch.nn.functional.one_hot(labels.long(), num_classes).to(torch.float32)
