"""Closed-form steps of linear models (``x Wᵀ + b``; the learners ``learner.model: linear`` builds): W and b as one
matrix ``Θ = [Wᵀ; b]``, their gradient computed without autograd (ℓ₂'s from the batch's Gram matrices), one
optimizer step of the learner's (:class:`vcl.engine.loop.Steps`) a batch. :mod:`vcl.engine.concurrent` fits
several organizations' linear learners with them at once, a learner alone fits with M = 1."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from vcl.engine.loop import Steps, _rows, _rows_of, own_rows
from vcl.engine.losses import local_loss_grad


class LinearSteps:
    """Steps of linear models ``x Wᵀ + b`` on :func:`vcl.engine.losses.local_loss` with closed-form gradients, W and b
    trained as one matrix ``Θ = [Wᵀ; b]`` (:func:`stacked_theta`; (d+1, K), or (M, d+1, K) stacked) on ``x`` ((N, d) or
    (M, N, d)); ``y`` (N, K) and ``w`` (N,) shared, or each model's own rows (M, N, K), (M, N) for sliced batches.
    float32 only; equal to autograd to float rounding (docs/design.md, "Training")."""

    def __init__(
        self, theta: Tensor, make_steps: Callable[[list[Tensor]], Steps], x, y, loss: str, w=None, blocks=None
    ):
        self.theta = theta.detach().clone()  # no autograd: a parameter the optimizer steps, its gradient computed here
        self.theta.grad = torch.empty_like(self.theta)  # written in place by every step
        self.steps = make_steps([self.theta])
        x, y, w = (None if t is None else t.detach() for t in (x, y, w))  # nothing here builds an autograd graph
        self.x, self.y, self.loss, self.w, self.n = x, y, loss, w, x.shape[-2]
        self.scale = 2.0 / y.shape[-1]  # ℓ₂'s gradient (2/K)(GΘ − C), one product (:meth:`step`)
        self.product = torch.addmm if self.theta.dim() == 2 else torch.baddbmm
        self.fixed: dict = {}  # ℓ₂'s (G, C) of in-order batches
        self.planned: dict = {}  # ℓ₂'s (G, C) of this epoch's shuffled batches, by id (:meth:`epoch`)
        self.total: tuple | None = None  # ℓ₂'s sums over all rows (:meth:`_sums`)
        if blocks is not None:
            self._block_moments(blocks.rows.to(x.device), blocks.batches)

    def _block_moments(self, rows: Tensor, batches: list[slice]) -> None:
        """ℓ₂ in the blocks' order (``rows``: each model's permutation, (M, N)): every batch's G and C before the first
        step, from rows gathered :data:`BLOCK_CHUNK_ROWS` at a time (the permuted rows are never held whole)."""
        if self.loss != "l2" or self.x.dim() != 3:
            raise ValueError("the blocks' precomputed sums are ℓ₂'s, of stacked inputs (M, N, d)")
        m, d, size = self.x.shape[0], self.x.shape[-1], batches[0].stop - batches[0].start
        full = [b for b in batches if b.stop - b.start == size]  # consecutive from row 0; a short last one after
        short = [[b] for b in batches if b.stop - b.start != size]
        per = max(1, BLOCK_CHUNK_ROWS // size)
        for group in [full[i : i + per] for i in range(0, len(full), per)] + short:
            idx, c, b = rows[:, group[0].start : group[-1].stop], len(group), group[0].stop - group[0].start
            x = own_rows(self.x, idx).view(m, c, b, d)
            y = _rows_of(self.y, idx).view(m, c, b, -1)
            if self.w is None:
                weights = 1.0 / b
            else:
                weights = _rows_of(self.w, idx).view(m, c, b)
                weights = weights / weights.sum(-1, keepdim=True).clamp_min(1e-12)
            gram, cross = (t.transpose(0, 1).contiguous().unbind(0) for t in moments(x, y, weights))
            self.fixed.update({(p.start, p.stop): (g, k) for p, g, k in zip(group, gram, cross, strict=True)})

    def epoch(self, pieces: list) -> list:
        """Before an epoch's steps on ``pieces``: when shuffled pieces partition the N rows and one holds more than
        half, ℓ₂'s G and C of that one are computed as the whole data's less the others'. Returns ``pieces``."""
        self.planned = {}
        n = self.n
        if self.loss != "l2" or not pieces or isinstance(pieces[0], slice) or sum(_rows(p) for p in pieces) != n:
            return pieces
        big = max(range(len(pieces)), key=lambda i: _rows(pieces[i]))
        if 2 * _rows(pieces[big]) <= n:
            return pieces
        others = [p for i, p in enumerate(pieces) if i != big]
        if self.total is None:
            self.total = self._sums(None)
        (g, c, w), (g_rest, c_rest, w_rest) = self.total, self._sums(torch.cat(others, -1))
        self.planned[id(pieces[big])] = ((g - g_rest) / (w - w_rest), (c - c_rest) / (w - w_rest))
        if len(others) == 1:
            self.planned[id(others[0])] = (g_rest / w_rest, c_rest / w_rest)
        return pieces

    def _sums(self, idx) -> tuple[Tensor, Tensor, Tensor | float]:
        """``x̃ᵀ W x̃``, ``x̃ᵀ W y`` and the sum of the weights W over the rows ``idx`` (all rows for None)."""
        if idx is None:
            x, y, w = self.x, self.y, self.w
        else:
            x = self.x[idx] if self.x.dim() == 2 else own_rows(self.x, idx)
            y, w = (None if t is None else _rows_of(t, idx) for t in (self.y, self.w))
        total = float(x.shape[-2]) if w is None else w.sum(-1).clamp_min(1e-12)[..., None, None]
        return (*moments(x, y, 1.0 if w is None else w), total)

    def _batch_weights(self, idx) -> Tensor | float:
        """Each of the batch's rows' weight in the loss's mean (1/B, or w_i / Σ w)."""
        if self.w is None:
            return 1.0 / (idx.stop - idx.start if isinstance(idx, slice) else idx.shape[-1])
        wb = self.w[..., idx] if isinstance(idx, slice) else self.w[idx]
        return wb / wb.sum(-1, keepdim=True).clamp_min(1e-12)

    def _gram(self, idx) -> tuple[Tensor, Tensor]:
        """ℓ₂'s ``G = x̃ᵀ D x̃`` and ``C = x̃ᵀ D y`` of the batch: an in-order one's once, a shuffled one's as the rows'
        weights scattered over all N rows (no gather of the batch's targets)."""
        key = (idx.start, idx.stop) if isinstance(idx, slice) else None
        if key in self.fixed:
            return self.fixed[key]
        weights = self._batch_weights(idx)
        if key is not None:
            gram = moments(self.x[..., idx, :], self.y[..., idx, :], weights)
            self.fixed[key] = gram
            return gram
        coef = self.x.new_zeros(self.x.shape[:-1])
        coef.scatter_(-1, idx, weights if isinstance(weights, Tensor) else coef.new_full(idx.shape, weights))
        return moments(self.x, self.y, coef)

    def step(self, idx) -> None:
        """One step on the batch ``idx`` of the N rows: a slice (in order, the same for every model) or row
        indices, (B,) or, stacked, (M, B)."""
        grad = self.theta.grad
        if self.loss == "l2" and (isinstance(idx, slice) or id(idx) in self.planned or 4 * idx.shape[-1] >= self.n):
            gram, c = self.planned.get(id(idx)) or self._gram(idx)  # a shuffled batch of few rows: gathering costs less
            self.product(c, gram, self.theta, beta=-self.scale, alpha=self.scale, out=grad)
        else:
            if isinstance(idx, slice):  # each model's y and w its own (M, N, ...: the blocks' order) or shared
                xb, yb, wb = self.x[..., idx, :], self.y[..., idx, :], None if self.w is None else self.w[..., idx]
            else:
                xb = self.x[idx] if self.x.dim() == 2 else own_rows(self.x, idx)
                yb, wb = (None if t is None else _rows_of(t, idx) for t in (self.y, self.w))
            g = local_loss_grad(linear_map(xb, self.theta), yb, self.loss, wb)
            grad[..., :-1, :] = xb.transpose(-1, -2) @ g
            torch.sum(g, -2, out=grad[..., -1, :])
        self.steps.update()


def linear_map(x: Tensor, theta: Tensor) -> Tensor:
    """``x Wᵀ + b`` for ``Θ = [Wᵀ; b]`` ((d+1, K), or stacked (M, d+1, K) on x (M, N, d)): one ``addmm`` /
    ``baddbmm``, with no column of ones."""
    if x.dim() == 2 and theta.dim() == 2:
        return torch.addmm(theta[-1], x, theta[:-1])
    return torch.baddbmm(theta[..., -1:, :], x, theta[..., :-1, :])


BLOCK_CHUNK_ROWS = 2**16  # rows of each model gathered at once for the blocks' sums (LinearSteps._block_moments)


def moments(x: Tensor, y: Tensor, weights: Tensor | float) -> tuple[Tensor, Tensor]:
    """``G = x̃ᵀ D x̃`` ((..., d+1, d+1)) and ``C = x̃ᵀ D y`` ((..., d+1, K)) for ``x̃ = [x, 1]`` and D the rows' weights
    (``weights``: (..., N), or one for every row), without making x̃. ``y`` (N, K) may be shared by a stack of x."""
    d = x.shape[-1]
    per_row = isinstance(weights, Tensor)
    xw = x * (weights.unsqueeze(-1) if per_row else weights)
    xwt = xw.transpose(-1, -2)
    lead = x.shape[:-2]
    gram = x.new_empty(*lead, d + 1, d + 1)
    c = x.new_empty(*lead, d + 1, y.shape[-1])
    gram[..., :d, :d] = xwt @ x
    gram[..., :d, d] = gram[..., d, :d] = xw.sum(-2)
    gram[..., d, d] = weights.sum(-1) if per_row else weights * x.shape[-2]
    c[..., :d, :] = xwt @ y
    c[..., d, :] = (weights.unsqueeze(-2) @ y).squeeze(-2) if per_row else y.sum(-2) * weights
    return gram, c


def stacked_theta(layer: torch.nn.Linear, width: int | None = None) -> Tensor:
    """A Linear layer as ``Θ = [Wᵀ; 0; b]``, (width + 1, K): zero rows for inputs beyond its own (padding)."""
    weight = layer.weight.detach().t()
    pad = (width or layer.in_features) - layer.in_features
    return torch.cat([weight, weight.new_zeros(pad, weight.shape[1]), layer.bias.detach().unsqueeze(0)])


@torch.no_grad()
def load_theta(theta: Tensor, layers: torch.nn.Linear | list[torch.nn.Linear]) -> None:
    """Write ``Θ`` (from :func:`stacked_theta`, trained) back into the layer's weight and bias; for a list of layers,
    ``Θ``'s stack (M × (width + 1) × K, zero rows for padding) into each layer in turn."""
    if isinstance(layers, torch.nn.Linear):
        layers, theta = [layers], theta.unsqueeze(0)
    for layer, own in zip(layers, theta, strict=True):
        layer.weight.copy_(own[: layer.in_features].t())
        layer.bias.copy_(own[-1])
