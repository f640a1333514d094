"""Alice's task: the overarching loss L₁, its pseudo-residual, the start F⁰ and the metric.

Classification works on logits with cross-entropy; regression with L1 (MAD) or MSE. The
pseudo-residual is ``−∂L/∂F`` with sum reduction (GAL Algorithm 1): ``onehot − softmax(F)`` for
cross-entropy, ``sign(y − F)`` for L1, ``2(y − F)`` for MSE.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from vcl.errors import VCLInputError
from vcl.losses import one_hot

TASK_LOSSES = {"classification": ("ce",), "regression": ("l1", "mse")}


@dataclass(frozen=True)
class Task:
    kind: str  # "classification" | "regression"
    num_outputs: int  # K: number of classes, or 1 for regression
    loss: str  # "ce" | "l1" | "mse"

    def __post_init__(self):
        if self.kind not in TASK_LOSSES:
            raise VCLInputError(f"data.task={self.kind!r} is unknown; use classification or regression.")
        if self.loss not in TASK_LOSSES[self.kind]:
            raise VCLInputError(
                f"gal.task_loss={self.loss!r} does not fit a {self.kind} task; use one of "
                f"{', '.join(TASK_LOSSES[self.kind])}."
            )

    @property
    def metric_name(self) -> str:
        return "accuracy" if self.kind == "classification" else "mad"

    @property
    def higher_is_better(self) -> bool:
        return self.kind == "classification"

    def initial(self, y: Tensor) -> Tensor:
        """F⁰ as one row (K,): log class frequencies, or the target mean (median for L1 would also do)."""
        if self.kind == "classification":
            counts = torch.bincount(y.long(), minlength=self.num_outputs).to(torch.float32)
            return torch.log(counts.clamp_min(1.0) / counts.sum())
        return y.to(torch.float32).mean(0)

    def loss_value(self, F_: Tensor, y: Tensor) -> Tensor:
        """L₁(y, F), mean over samples."""
        if self.kind == "classification":
            return F.cross_entropy(F_, y.long())
        if self.loss == "l1":
            return (y - F_).abs().mean()
        return (y - F_).pow(2).mean()

    def loss_along(self, F_: Tensor, direction: Tensor, y: Tensor, eta: Tensor) -> tuple[Tensor, Tensor]:
        """L₁(y, F + η·direction) and its derivative in η (shape (1,)), for the line search. Cross-entropy calls
        the kernels autograd's backward calls, in its order (equal bit for bit, tested) at half its cost — the
        line search evaluates this up to 200 times a round; the regression losses go through autograd."""
        if self.kind == "classification":
            aten, y = torch.ops.aten, y.long()
            with torch.no_grad():
                log_p = aten._log_softmax(F_ + eta * direction, 1, False)
                loss, total = aten.nll_loss_forward(log_p, y, None, 1, -100)  # mean over rows
                grad = aten.nll_loss_backward(torch.ones_like(loss), log_p, y, None, 1, -100, total)
                grad = aten._log_softmax_backward_data(grad, log_p, 1, log_p.dtype)
                return loss, (grad * direction).sum((0, 1), keepdim=True).view(1)
        eta = eta.detach().requires_grad_(True)
        with torch.enable_grad():
            loss = self.loss_value(F_ + eta * direction, y)
            (slope,) = torch.autograd.grad(loss, eta)
        return loss.detach(), slope

    def pseudo_residual(self, F_: Tensor, y: Tensor) -> Tensor:
        """``−∂L₁/∂F`` with sum reduction, in closed form."""
        if self.kind == "classification":
            return one_hot(y, self.num_outputs) - torch.softmax(F_, dim=-1)
        if self.loss == "l1":
            return torch.sign(y - F_)
        return 2.0 * (y - F_)

    def targets(self, y: Tensor) -> Tensor:
        """The labels as a float (N, K) target a learner can fit (one-hot for classes)."""
        return one_hot(y, self.num_outputs) if self.kind == "classification" else y.to(torch.float32)

    def metric(self, F_: Tensor, y: Tensor) -> float:
        """Accuracy (classes) or mean absolute deviation (regression), in float32 as torchmetrics computes them."""
        if F_.shape[0] != y.shape[0] or (self.kind == "regression" and F_.shape != y.shape):
            raise ValueError(f"predictions {tuple(F_.shape)} and targets {tuple(y.shape)} do not match.")
        if self.kind == "classification":
            return float((F_.argmax(-1) == y.long()).sum().float() / y.shape[0])
        return float(torch.sum(torch.abs(F_.reshape(-1).float() - y.reshape(-1).float()), dim=0) / y.numel())

    def better(self, a: float, b: float) -> bool:
        return a > b if self.higher_is_better else a < b
