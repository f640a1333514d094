"""Fit several organizations' same-architecture learners at once, in one pass on one device.

The organizations of a GAL round are independent: each fits the same pseudo-residual on its own
columns. When their learners are :class:`ResidualRegressor` s with the same hyper-parameters, their
parameters are stacked (``torch.func.stack_module_state``) and trained under ``vmap``: one batched
forward/backward per step instead of M. Inputs narrower than the widest are zero-padded and the
matching weights start at zero, so they get zero gradient and stay zero; gradient clipping is per
organization. The result equals fitting each learner alone (``tests/test_learners.py``).

This is a single-host execution strategy of the simulation: each organization's data and model are
still only used to compute that organization's own fit; nothing is sent anywhere.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor
from torch.func import functional_call, stack_module_state, vmap

from models.residual import ResidualRegressor, build_optimizer
from vcl.losses import local_loss

_SHARED = (
    "hidden",
    "out_features",
    "loss",
    "lr",
    "momentum",
    "weight_decay",
    "epochs",
    "milestones",
    "gamma",
    "batch_size",
    "grad_clip",
    "engine",
)


def concurrency_key(learner) -> tuple | None:
    """Learners with equal keys can be fitted together; ``None`` means fit alone."""
    if not isinstance(learner, ResidualRegressor) or learner.hparams.engine != "fast":
        return None
    return tuple((k, str(learner.hparams[k])) for k in _SHARED)


def _padded_net(learner: ResidualRegressor, width: int) -> torch.nn.Module:
    net = copy.deepcopy(learner.net)
    first = net[0]
    if first.in_features < width:
        wide = torch.nn.Linear(width, first.out_features, device=first.weight.device)
        with torch.no_grad():
            wide.weight.zero_()
            wide.weight[:, : first.in_features] = first.weight
            wide.bias.copy_(first.bias)
        net[0] = wide
    return net


def fit_concurrently(
    learners: list[ResidualRegressor],
    features: list[Tensor],
    targets: Tensor,
    sample_weight: Tensor | None = None,
) -> list[ResidualRegressor]:
    """Train ``learners[m]`` on ``(features[m], targets)`` for every m at once; returns the learners."""
    keys = {concurrency_key(lr) for lr in learners}
    if len(keys) != 1 or None in keys:
        raise ValueError("fit_concurrently needs fast-engine ResidualRegressors with equal hyper-parameters.")
    hp = learners[0].hparams
    device = targets.device
    width = max(f.shape[1] for f in features)
    x = torch.stack([torch.nn.functional.pad(f, (0, width - f.shape[1])) for f in features])  # M,N,d
    nets = [_padded_net(lr.to(device), width) for lr in learners]
    params, buffers = stack_module_state(nets)
    base = copy.deepcopy(nets[0]).to("meta")

    def forward_one(p, b, xi):
        return functional_call(base, (p, b), (xi,))

    forward = vmap(forward_one)
    opt, sched = build_optimizer(params.values(), hp.lr, hp.momentum, hp.weight_decay, hp.milestones, hp.gamma)
    n, m = targets.shape[0], len(learners)
    gens = [torch.Generator(device="cpu").manual_seed(lr.hparams.seed) for lr in learners]
    y_all = targets.expand(m, *targets.shape)
    w_all = None if sample_weight is None else sample_weight.expand(m, n)
    for _ in range(hp.epochs):
        if n <= hp.batch_size:
            batches = [(x, y_all, w_all)]
        else:
            order = torch.stack([torch.randperm(n, generator=g) for g in gens]).to(device)  # M,N
            batches = []
            for start in range(0, n, hp.batch_size):
                idx = order[:, start : start + hp.batch_size]
                xb = torch.gather(x, 1, idx.unsqueeze(-1).expand(-1, -1, width))
                yb = torch.gather(y_all, 1, idx.unsqueeze(-1).expand(-1, -1, targets.shape[1]))
                wb = None if w_all is None else torch.gather(w_all, 1, idx)
                batches.append((xb, yb, wb))
        for xb, yb, wb in batches:
            opt.zero_grad(set_to_none=True)
            local_loss(forward(params, buffers, xb), yb, hp.loss, wb).backward()
            if hp.grad_clip:
                _clip_per_model(list(params.values()), hp.grad_clip)
            opt.step()
        sched.step()
    with torch.no_grad():
        for i, lr in enumerate(learners):
            for name, p in lr.net.named_parameters():
                stacked = params[name][i]
                if name == "0.weight":
                    stacked = stacked[:, : p.shape[1]]
                p.copy_(stacked)
    return learners


def _clip_per_model(params: list[Tensor], max_norm: float) -> None:
    """``clip_grad_norm_`` applied to each organization's slice of the stacked parameters."""
    sq = sum(p.grad.pow(2).flatten(1).sum(1) for p in params if p.grad is not None)
    coef = (max_norm / (sq.sqrt() + 1e-6)).clamp(max=1.0)
    for p in params:
        if p.grad is not None:
            p.grad.mul_(coef.view(-1, *([1] * (p.grad.dim() - 1))))
