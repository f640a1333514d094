"""Alice's task: the overarching loss L₁ (cross-entropy on logits; regression: L1 (MAD) or MSE), its
pseudo-residual ``−∂L/∂F`` (docs/design.md, "GAL (Algorithm 1)"), the start F⁰ and the metric."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torchmetrics.functional.classification import binary_auroc

from vcl.engine.losses import one_hot
from vcl.errors import VCLInputError

# rows of a block of the line search's cross-entropy (Task.along): on the CPU 2 MB of float64 at 4 classes (in cache);
# on an accelerator 2^22 rows (128 MB there), so a block's few kernels are launched a handful of times, not hundreds
CHUNK_ROWS, DEVICE_CHUNK_ROWS = 1 << 16, 1 << 22
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
    def binary(self) -> bool:
        """Two classes: the runs also report the area under the ROC curve (:meth:`auroc`) beside the accuracy."""
        return self.kind == "classification" and self.num_outputs == 2

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

    def along(self, F_: Tensor, direction: Tensor, y: Tensor) -> Callable[[float], tuple[float, float]]:
        """η ↦ (L₁(y, F + η·direction), dL₁/dη) in float64, for the line search, which evaluates it up to 200
        times a round: NumPy arrays on the CPU (an operation on a small array costs about a microsecond there,
        a tensor operation ten), tensors on an accelerator."""
        xp = np if F_.device.type == "cpu" else torch
        if self.kind == "classification":
            return self._cross_entropy_along(F_.detach(), direction.detach(), y, xp)
        F64, d = (t.detach().double() for t in (F_, direction))
        r = y.to(F64.device, torch.float64).reshape(F64.shape) - F64
        if self.loss == "mse":  # a quadratic in η: mean(r²) − 2η·mean(r·d) + η²·mean(d²)
            a, b, c = float((d * d).mean()), float((r * d).mean()), float((r * r).mean())
            return lambda eta: (c - 2 * b * eta + a * eta * eta, 2 * (a * eta - b))
        if xp is np:
            r, d = r.numpy(), d.numpy()

        def absolute(eta: float) -> tuple[float, float]:
            e = r - eta * d
            return float(xp.abs(e).mean()), -float((xp.sign(e) * d).mean())

        return absolute

    @staticmethod
    def _cross_entropy_along(F_: Tensor, d: Tensor, y: Tensor, xp):
        """The cross-entropy along the line, a block of rows at a time (:data:`CHUNK_ROWS`, on tensors
        :data:`DEVICE_CHUNK_ROWS`): each block's logits and direction made float64 as it is reached (K × rows, so each
        step over classes is on whole rows), the sums kept in float64 (on tensors, on the device: one synchronization
        an evaluation). Beside the float32 F and direction nothing of size N × K is held or made (at 10^7 rows and 4
        classes, whole float64 copies were ~1 GB at the round's peak)."""
        n, rows = F_.shape[0], CHUNK_ROWS if xp is np else DEVICE_CHUNK_ROWS
        true = y.long().reshape(-1, 1).to(F_.device)
        f_y, d_y = (float(t.gather(1, true).double().sum()) / n for t in (F_, d))  # the true classes' means
        Ft, dt = F_.t(), d.t()  # K × N views
        if xp is np:
            Ft, dt = Ft.numpy(), dt.numpy()

        def block(a, start: int):
            part = a[:, start : start + rows]
            if xp is np:
                return np.array(part, dtype=np.float64, order="C")
            return torch.empty(part.shape, dtype=torch.float64, device=part.device).copy_(part)

        def cross_entropy(eta: float) -> tuple[float, float]:
            total_loss = total_slope = 0.0
            for start in range(0, n, rows):
                z, dz = block(Ft, start), block(dt, start)
                z += eta * dz
                top = xp.amax(z, axis=0)
                z -= top
                e = xp.exp(z, out=z) if xp is np else z.exp_()
                total = e.sum(axis=0)
                total_loss = total_loss + (top + xp.log(total)).sum()
                e *= dz
                total_slope = total_slope + (e.sum(axis=0) / total).sum()
            return float(total_loss) / n - f_y - eta * d_y, float(total_slope) / n - d_y

        return cross_entropy

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

    def auroc(self, F_: Tensor, y: Tensor) -> float | None:
        """Area under the ROC curve (torchmetrics) of the score ``F[:, 1] − F[:, 0]``, the log-odds of class 1 under
        the softmax Alice's cross-entropy uses (the ranking is all AUROC reads, so scores that are not logits, such
        as DC's class shares, rank the same way); ``None`` where ``y`` holds one class only."""

        if F_.shape[0] != y.shape[0] or F_.ndim != 2 or F_.shape[1] != 2:
            raise ValueError(f"predictions {tuple(F_.shape)} and targets {tuple(y.shape)} do not make a binary task.")
        y = y.long().reshape(-1)
        if y.numel() == 0 or bool((y == y[0]).all()):
            return None
        score = (F_[:, 1].double() - F_[:, 0].double()).cpu()
        return float(binary_auroc(score, y.cpu(), thresholds=None))
