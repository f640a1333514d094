"""The one training loop of vcl's torch models, and the one optimizer step every party takes.

:class:`Steps` is one model's optimizer, schedule, precision, clipping and device; :func:`train_epochs` loops over
:func:`minibatches`; a split network's party calls :meth:`Steps.backward` and :meth:`Steps.update` itself. What
Lightning Fabric would give, without importing it (about 3 s): docs/design.md ("Training")."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor

from vcl.engine import progress

PRECISIONS = ("32-true", "bf16-mixed", "16-mixed")
DRAWS = 0xD809  # the purpose tag of a fit's draws from torch's global generator (dropout)


def derived_seed(*parts: int) -> int:
    """A 31-bit seed from (run or learner seed, round, place, purpose, ...), so independent draws get independent
    streams: NumPy's ``SeedSequence(parts).generate_state(1)[0]`` masked to 31 bits, in plain integer arithmetic."""
    words = []
    for p in parts:
        p = int(p)
        if p < 0:
            raise ValueError(f"a seed part must be a non-negative integer, got {p}.")
        words.append(p & _MASK32)
        while p > _MASK32:  # a large integer: its 32-bit words, least significant first, as NumPy splits it
            p >>= 32
            words.append(p & _MASK32)
    # SeedSequence's mix_entropy into a pool of 4 words (after M. O'Neill's seed_seq): "hashmix" number h is
    # (v ^ A_h) · A_(h+1) mod 2³² then v ^ (v >> 16), with A_h = INIT_A · MULT_Aʰ; "mix" is (L·x − R·y) mod 2³² then
    # the same shift; then generate_state's first word from the pool's first.
    hash_a = _hash_constants(16 + 4 * max(0, len(words) - 4))
    words += [0] * (4 - len(words))
    pool = []
    for h in range(4):
        v = (words[h] ^ hash_a[h]) * hash_a[h + 1] & _MASK32
        pool.append(v ^ (v >> 16))
    h = 4
    for src, dst in _POOL_MIXES:
        v = (pool[src] ^ hash_a[h]) * hash_a[h + 1] & _MASK32
        r = (_MIX_L * pool[dst] - _MIX_R * (v ^ (v >> 16))) & _MASK32
        pool[dst] = r ^ (r >> 16)
        h += 1
    for word in words[4:]:
        for dst in range(4):
            v = (word ^ hash_a[h]) * hash_a[h + 1] & _MASK32
            r = (_MIX_L * pool[dst] - _MIX_R * (v ^ (v >> 16))) & _MASK32
            pool[dst] = r ^ (r >> 16)
            h += 1
    v = (pool[0] ^ _INIT_B) * (_INIT_B * _MULT_B) & _MASK32
    return (v ^ (v >> 16)) & 0x7FFFFFFF


seed_for = derived_seed  # (run seed, round, place, purpose, ...) → a 31-bit seed: draws don't share RNG state


def _hash_constants(n: int) -> list[int]:
    """SeedSequence's hash constants A_0 … A_n (``derived_seed``): the table, or for longer seeds a new list (the
    table is never changed, so threads may share it)."""
    if n < len(_HASH_A):
        return _HASH_A
    return [_HASH_A[0] * pow(_MULT_A, k, 1 << 32) & _MASK32 for k in range(n + 1)]


_MASK32, _MULT_A, _INIT_B, _MULT_B = 0xFFFFFFFF, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715
_HASH_A = [0x43B0D7E5 * pow(_MULT_A, k, 1 << 32) & _MASK32 for k in range(33)]  # A_k = INIT_A · MULT_Aᵏ: 8 words
_POOL_MIXES = tuple((src, dst) for src in range(4) for dst in range(4) if src != dst)


@contextlib.contextmanager
def seeded_draws(seed: int, device):
    """Inside, torch's global generator on ``device`` (what dropout draws from) starts at ``seed``; outside,
    its state is as it was. A fit's draws then depend on its own seed only, not on what ran before it."""
    device = torch.device(device)
    cuda = device.type == "cuda"
    index = device.index if device.index is not None else (torch.cuda.current_device() if cuda else None)
    with torch.random.fork_rng(devices=[index] if cuda else []):
        torch.default_generator.manual_seed(seed)
        if cuda:
            with torch.cuda.device(index):
                torch.cuda.manual_seed(seed)
        yield


@contextlib.contextmanager
def seeded_init(seed: int):
    """Inside, torch's CPU generator (what a new module's initial weights draw from) starts at ``seed``; outside,
    its state is as it was. Only the CPU generator: ``torch.manual_seed`` would also seed (slowly) every accelerator."""
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        yield


def autocast(precision: str, device) -> contextlib.AbstractContextManager:
    """Mixed precision: bf16 (``bf16-mixed``) or fp16 (``16-mixed``) autocast on ``device``; none for ``32-true``."""
    if precision == "32-true":
        return contextlib.nullcontext()
    dtype = torch.float16 if precision == "16-mixed" else torch.bfloat16
    return torch.autocast(torch.device(device).type, dtype=dtype)


def build_optimizer(
    params,
    lr: float,
    momentum: float,
    weight_decay: float,
    milestones,
    gamma: float,
    optimizer: str = "sgd",
    precision: str = "32-true",
):
    """SGD (GAL Table 9: lr 0.1, momentum 0.9, weight decay 5e-4) or Adam (LSTM: lr 1e-3), with step decay, the same
    for the fast engine and Lightning's Trainer. SGD is fused only at ``32-true``: behind fp16's gradient scaler a fused
    SGD moves its weights on skipped steps, and Lightning refuses to clip an optimizer that unscales itself."""
    params = list(params)
    if optimizer == "adam":
        opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    else:
        fused = precision == "32-true" and all(
            p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params
        )
        opt = torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay, fused=fused or None)
    return opt, torch.optim.lr_scheduler.MultiStepLR(opt, milestones=list(milestones), gamma=gamma)


@torch.no_grad()
def clip_norm(params: list[Tensor], max_norm: float, total: Tensor | None = None) -> None:
    """Scale the gradients so their joint norm is at most ``max_norm`` (``total``: that norm, if computed elsewhere, as
    for a network split between parties): ``clip_grad_norm_``'s arithmetic without its per-call grouping."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    if len({(g.device, g.dtype) for g in grads}) > 1 or grads[0].device.type not in ("cpu", "cuda"):
        if total is None:
            torch.nn.utils.clip_grad_norm_(params, max_norm)
        else:
            torch.nn.utils.clip_grads_with_norm_(params, max_norm, total)
        return
    if total is None:
        total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
    torch._foreach_mul_(grads, torch.clamp(float(max_norm) / (total + 1e-6), max=1.0).to(grads[0].device))


class Steps:
    """One model's optimizer steps: zero the gradients, back-propagate (scaled under fp16), clip, step; ``scheduler``
    steps once per epoch; ``clip_with(params, clip)`` replaces the joint norm (models fitted together clip apart)."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        scheduler=None,
        *,
        clip: float = 0.0,
        precision: str = "32-true",
        device="cpu",
        clip_with: Callable[[list[Tensor], float], None] | None = None,
    ):
        if precision not in PRECISIONS:
            raise ValueError(f"run.precision={precision!r}; use one of {', '.join(PRECISIONS)}.")
        self.optimizer, self.scheduler = optimizer, scheduler
        self.clip, self.clip_with = clip, clip_with
        self.precision, self.device = precision, torch.device(device)
        self.params = [p for group in optimizer.param_groups for p in group["params"]]
        self.scaler = torch.amp.GradScaler(self.device.type) if precision == "16-mixed" else None

    def autocast(self) -> contextlib.AbstractContextManager:
        return autocast(self.precision, self.device)

    def backward(self, loss: Tensor, grad: Tensor | None = None) -> None:
        """Fresh gradients of ``loss`` (or of ``loss`` · ``grad``, when ``loss`` is an output whose gradient
        ``grad`` came from another party)."""
        self.optimizer.zero_grad(set_to_none=True)
        (loss if self.scaler is None else self.scaler.scale(loss)).backward(grad)

    def grad_norms(self) -> Tensor:
        """Each parameter's gradient norm (one part of a network clipped as one)."""
        return torch.stack([torch.linalg.vector_norm(p.grad) for p in self.params if p.grad is not None])

    def update(self, total_norm: Tensor | None = None) -> None:
        """Clip (by ``total_norm``, the whole network's gradient norm, when given) and take the step."""
        if self.clip:
            if self.scaler is not None:
                self.scaler.unscale_(self.optimizer)
            params = [p for p in self.params if p.grad is not None]
            if self.clip_with is not None:
                self.clip_with(params, self.clip)
            else:
                clip_norm(params, self.clip, None if total_norm is None else total_norm.to(params[0].device))
        if self.scaler is None:
            self.optimizer.step()
        else:
            self.scaler.step(self.optimizer)
            self.scaler.update()

    def step(self, loss: Tensor, grad: Tensor | None = None) -> None:
        self.backward(loss, grad)
        self.update()

    def epoch_end(self) -> None:
        if self.scheduler is not None:
            self.scheduler.step()


def own_rows(t: Tensor, idx) -> Tensor:
    """Each model's own rows of a stack ``t`` (M, N, ...): ``t[arange(M)[:, None], idx]`` for indices (M, B),
    ``t[:, idx]`` for a slice, by one ``index_select``; an expanded stack (stride 0) selects from its one tensor."""
    if isinstance(idx, slice):
        return t[:, idx]
    if t.stride(0) == 0:
        return _rows_of(t[0], idx)
    m, n = t.shape[:2]
    dtype = idx.dtype if idx.dtype == torch.int32 and m * n < 2**31 else torch.long  # int32 rows stay int32
    offsets = torch.arange(0, m * n, n, device=idx.device, dtype=dtype).unsqueeze(1)
    return _select_rows(t.reshape(m * n, *t.shape[2:]), (idx + offsets).view(-1)).view(*idx.shape, *t.shape[2:])


def _rows_of(t: Tensor, idx) -> Tensor:
    """``t[idx]`` for rows shared by every model (``index_select``: a fraction of advanced indexing's time)."""
    if isinstance(idx, slice):
        return t[idx]
    return _select_rows(t, idx.reshape(-1)).view(*idx.shape, *t.shape[1:])


_WORDS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64, 16: torch.complex128}


def _select_rows(t: Tensor, index: Tensor) -> Tensor:
    """``t.index_select(0, index)``, rows of up to 8 or of 16 bytes selected as integer or complex128 words of a 1-D
    view: the same bytes in about half the time (docs/design.md, "Concurrent organizations")."""
    size = math.prod(t.shape[1:]) * t.element_size()  # bytes a row
    word = _WORDS.get(size) if t.dim() > 1 and t.is_contiguous() and not t.requires_grad else None
    if word is None or t.storage_offset() * t.element_size() % size:  # a word view needs aligned rows
        return t.index_select(0, index)
    return t.view(-1).view(word).index_select(0, index).view(t.dtype).view(-1, *t.shape[1:])


def minibatches(
    n: int,
    batch_size: int,
    generator: torch.Generator | list[torch.Generator] | Callable[[], list[torch.Generator]],
    *,
    shuffle: bool = True,
    min_rows: int = 1,
    device=None,
) -> list:
    """One epoch's minibatches of ``n`` rows: a permutation drawn from ``generator`` cut into ``batch_size`` pieces on
    ``device`` (``shuffle=False``: slices in order), a last piece under ``min_rows`` left out. Several generators give
    pieces (M, B) of every model's indices; ``generator`` may also be a function returning them, or the permutations."""
    if shuffle:
        if callable(generator):
            generator = generator()
        if isinstance(generator, Tensor):  # the epoch's permutations, drawn already (:func:`permutations`)
            order = generator
        elif isinstance(generator, list):
            order = permutations(n, generator)[0]
        else:
            order = torch.randperm(n, generator=generator)
        pieces = list(order.to(device).split(batch_size, dim=-1))
    else:
        pieces = [slice(start, min(start + batch_size, n)) for start in range(0, n, batch_size)]
    if pieces and _rows(pieces[-1]) < min_rows:
        pieces = pieces[:-1]
    return pieces


def permutations(n: int, generators: list[torch.Generator], epochs: int = 1, dtype=torch.long) -> list[Tensor]:
    """Each generator's next ``epochs`` permutations of ``n``, what it gives drawing alone: one (M, n) stack per
    epoch, views of one block (M, epochs, n). ``dtype=torch.int32`` draws the same numbers, for int32 consumers."""
    drawn = torch.empty(len(generators), epochs, n, dtype=dtype)
    rows = iter(drawn.view(len(generators) * epochs, n).unbind(0))  # each draw into its own row: no stack, no copy
    for generator in generators:
        for _ in range(epochs):
            torch.randperm(n, generator=generator, out=next(rows))
    return [drawn[:, epoch] for epoch in range(epochs)]


def _rows(piece) -> int:
    return piece.stop - piece.start if isinstance(piece, slice) else piece.shape[-1]


def train_epochs(
    steps: Steps,
    epochs: int,
    batches: Callable[[int], Iterable],
    loss: Callable[[int, Any], Tensor | None],
    *,
    models: int = 1,
    epoch_end: Callable[[int], None] | None = None,
) -> None:
    """``epochs`` passes over ``batches(epoch)``: each batch's ``loss(epoch, batch)`` under the precision's
    autocast, and one step on it (a body that returns None has stepped itself, between messages). After each
    epoch the schedule steps, ``epoch_end(epoch)`` runs, and the progress bar counts ``models`` model-epochs."""
    for epoch in range(epochs):
        for batch in batches(epoch):
            with steps.autocast():
                value = loss(epoch, batch)
            if value is not None:
                steps.step(value)
        steps.epoch_end()
        if epoch_end is not None:
            epoch_end(epoch)
        progress.advance(models)
