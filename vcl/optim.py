"""SGD, Adam, L-BFGS and the step schedule, computed as ``torch.optim`` computes them, without importing TorchDynamo.

``torch.optim`` imports TorchDynamo (``torch._dynamo``, and SymPy with it) the first time an optimizer is built
or stepped: about 1.3 s on a small machine, more than a whole default run's rounds, for a compiler vcl never
uses. These classes take the same tensor operations in the same order as ``torch.optim.SGD`` and
``torch.optim.Adam`` (their per-tensor implementations; the multi-tensor ones that CUDA uses do the same
arithmetic) and ``torch.optim.lr_scheduler.MultiStepLR``, so their results are bit-for-bit those of torch's
(``tests/test_optim.py`` holds them equal); :func:`lbfgs_scalar` is ``torch.optim.LBFGS`` without a line-search
function on one number, in Python floats. They keep only what vcl's parties use: one parameter group, no sparse
or complex parameters, no ``maximize``, no state dict (every fit builds a fresh optimizer). ``run.engine:
trainer`` gives Lightning torch's own classes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import Tensor


class Optimizer:
    """What :class:`vcl.loop.Steps` and ``torch.amp.GradScaler`` read of an optimizer: ``param_groups`` (one),
    ``zero_grad`` and ``step``."""

    def __init__(self, params: Iterable[Tensor], **defaults):
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        self.param_groups = [{"params": params, **defaults}]
        self.state: dict[Tensor, dict] = {}

    @property
    def params(self) -> list[Tensor]:
        return self.param_groups[0]["params"]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach_().zero_()


class SGD(Optimizer):
    """``torch.optim.SGD`` (momentum, dampening 0, no Nesterov, L2 weight decay)."""

    def __init__(self, params, lr: float, momentum: float = 0.0, weight_decay: float = 0.0):
        super().__init__(params, lr=lr, momentum=momentum, weight_decay=weight_decay)

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            return
        grads = [p.grad for p in params]
        if group["weight_decay"] != 0:
            grads = torch._foreach_add(grads, params, alpha=group["weight_decay"])
        if group["momentum"] != 0:  # a parameter's first step starts its buffer at its gradient
            buffers = [self.state.get(p) for p in params]
            if all(b is not None for b in buffers):
                torch._foreach_mul_(buffers, group["momentum"])
                torch._foreach_add_(buffers, grads, alpha=1)
            else:
                for i, (p, grad) in enumerate(zip(params, grads, strict=True)):
                    if buffers[i] is None:
                        buffers[i] = self.state[p] = grad.detach().clone()
                    else:
                        buffers[i].mul_(group["momentum"]).add_(grad, alpha=1)
            grads = buffers
        torch._foreach_add_(params, grads, alpha=-group["lr"])


class Adam(Optimizer):
    """``torch.optim.Adam`` (L2 weight decay, no AMSGrad)."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
        super().__init__(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state.get(p)
            if state is None:
                state = self.state[p] = {
                    "step": 0.0,
                    "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                    "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
                }
            state["step"] += 1.0
            grad = p.grad if wd == 0 else p.grad.add(p, alpha=wd)
            exp_avg, exp_avg_sq, step = state["exp_avg"], state["exp_avg_sq"], state["step"]
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step_size = lr / (1 - beta1**step)
            denom = (exp_avg_sq.sqrt() / (1 - beta2**step) ** 0.5).add_(eps)
            p.addcdiv_(exp_avg, denom, value=-step_size)


class MultiStepLR:
    """``torch.optim.lr_scheduler.MultiStepLR``: the rate times ``gamma`` at each milestone epoch."""

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1):
        self.optimizer, self.milestones, self.gamma = optimizer, list(milestones), gamma
        self.last_epoch = -1
        self.step()  # as torch's schedulers do on construction: epoch 0 (a milestone at 0 applies at once)

    def step(self) -> None:
        self.last_epoch += 1
        hits = self.milestones.count(self.last_epoch)
        if hits:
            for group in self.optimizer.param_groups:
                group["lr"] = group["lr"] * self.gamma**hits


def lbfgs_scalar(
    fun: Callable[[float], tuple[float, float]],
    x: float,
    steps: int,
    lr: float = 1.0,
    max_iter: int = 20,
    tolerance_grad: float = 1e-7,
    tolerance_change: float = 1e-9,
    history_size: int = 100,
) -> float:
    """``steps`` calls of ``torch.optim.LBFGS(lr=lr).step`` (no line-search function: up to ``max_iter``
    iterations of fixed step ``lr`` along the L-BFGS direction, the first scaled to at most a unit move) on one
    scalar parameter starting at ``x``, in Python floats; ``fun(x)`` gives (loss, derivative). Returns the last x.
    torch's iterations op for op (tested equal in float64), without a tensor operation's dispatch on a number."""
    max_eval = max_iter * 5 // 4
    n_total, d, t, h_diag, prev_g = 0, 0.0, lr, 1.0, 0.0
    old_dirs: list[float] = []
    old_stps: list[float] = []
    ro: list[float] = []
    for _ in range(steps):
        loss, g = fun(x)
        evals = 1
        if abs(g) <= tolerance_grad:
            continue
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            n_total += 1
            if n_total == 1:
                d, h_diag = -g, 1.0
            else:
                y, s = g - prev_g, d * t
                ys = y * s
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / (y * y)
                q, al = -g, [0.0] * len(old_dirs)
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = old_stps[i] * q * ro[i]
                    q = q + -al[i] * old_dirs[i]
                d = q * h_diag
                for i in range(len(old_dirs)):
                    d = d + (al[i] - old_dirs[i] * d * ro[i]) * old_stps[i]
            prev_g, prev_loss = g, loss
            t = min(1.0, 1.0 / abs(g)) * lr if n_total == 1 else lr
            if g * d > -tolerance_change:
                break
            x = x + t * d
            opt_cond = False
            if n_iter != max_iter:
                loss, g = fun(x)
                opt_cond = abs(g) <= tolerance_grad
                evals += 1
            if n_iter == max_iter or evals >= max_eval or opt_cond:
                break
            if abs(d * t) <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                break
    return x
