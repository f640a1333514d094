"""SGD, Adam, L-BFGS and the step schedule, computed as ``torch.optim`` computes them, without importing TorchDynamo.

``torch.optim`` imports TorchDynamo (``torch._dynamo``, and SymPy with it) the first time an optimizer is built
or stepped: about 1.3 s on a small machine, more than a whole default run's rounds, for a compiler vcl never
uses. These classes take the same tensor operations in the same order as ``torch.optim.SGD`` and
``torch.optim.Adam`` (their per-tensor implementations; the multi-tensor ones that CUDA uses do the same
arithmetic), ``torch.optim.LBFGS`` without a line-search function, and ``torch.optim.lr_scheduler.MultiStepLR``,
so their results are bit-for-bit those of torch's (``tests/test_optim.py`` holds them equal). They keep only
what vcl's parties use: one parameter group, no sparse or complex parameters, no ``maximize``, no state dict
(every fit builds a fresh optimizer). ``run.engine: trainer`` gives Lightning torch's own classes.
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


class LBFGS(Optimizer):
    """``torch.optim.LBFGS`` without a line-search function: ``step(closure)`` runs up to ``max_iter`` iterations
    of fixed step ``lr`` along the L-BFGS direction (the first one scaled to at most a unit move)."""

    def __init__(
        self,
        params,
        lr: float = 1.0,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
    ):
        max_eval = max_iter * 5 // 4 if max_eval is None else max_eval
        super().__init__(
            params,
            lr=lr,
            max_iter=max_iter,
            max_eval=max_eval,
            tolerance_grad=tolerance_grad,
            tolerance_change=tolerance_change,
            history_size=history_size,
        )
        self.memory: dict = {"func_evals": 0, "n_iter": 0}

    def _flat_grad(self) -> Tensor:
        return torch.cat([p.new(p.numel()).zero_() if p.grad is None else p.grad.view(-1) for p in self.params], 0)

    def _add_grad(self, step_size, update: Tensor) -> None:
        offset = 0
        for p in self.params:
            p.add_(update[offset : offset + p.numel()].view_as(p), alpha=step_size)
            offset += p.numel()

    @torch.no_grad()
    def step(self, closure: Callable[[], Tensor]) -> Tensor:
        closure = torch.enable_grad()(closure)
        g = self.param_groups[0]
        lr, max_iter, max_eval = g["lr"], g["max_iter"], g["max_eval"]
        tolerance_grad, tolerance_change, history_size = g["tolerance_grad"], g["tolerance_change"], g["history_size"]
        state = self.memory
        orig_loss = closure()
        loss = float(orig_loss.detach())
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if flat_grad.abs().max() <= tolerance_grad:
            return orig_loss
        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag, prev_flat_grad, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad.sub(prev_flat_grad)
                s = d.mul(t)
                ys = y.dot(s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / y.dot(y)
                num_old = len(old_dirs)
                al = state.setdefault("al", [None] * history_size)
                q = flat_grad.neg()
                for i in range(num_old - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q.add_(old_dirs[i], alpha=-al[i])
                d = r = torch.mul(q, H_diag)
                for i in range(num_old):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r.add_(old_stps[i], alpha=al[i] - be_i)
            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone(memory_format=torch.contiguous_format)
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss
            t = min(1.0, 1.0 / flat_grad.abs().sum()) * lr if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d)
            if gtd > -tolerance_change:
                break
            ls_func_evals = 0
            self._add_grad(t, d)
            opt_cond = False
            if n_iter != max_iter:
                with torch.enable_grad():
                    loss = float(closure().detach())
                flat_grad = self._flat_grad()
                opt_cond = flat_grad.abs().max() <= tolerance_grad
                ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if d.mul(t).abs().max() <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag)
        state.update(prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss
