"""The fast engine's stacked fit: one learner, or several organizations' same-architecture learners at once, in
one pass on one device (a learner alone: M = 1), equal to fitting each alone (``tests/test_learners.py``). How the
stacking, padding and linear steps go: docs/design.md ("Concurrent organizations")."""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import torch
from pytorch_lightning.utilities.parsing import AttributeDict
from torch import Tensor
from torch.func import functional_call, stack_module_state, vmap

from vcl.engine.linear import LinearSteps, linear_map, load_theta, stacked_theta
from vcl.engine.loop import derived_seed, own_rows, permutations, train_epochs
from vcl.engine.losses import local_loss, local_losses


@runtime_checkable
class Stackable(Protocol):
    """What the batched engine needs of a learner it fits beside others of one architecture (a learner without these
    is fitted alone; docs/design.md, "Concurrent organizations")."""

    net: torch.nn.Module
    hparams: AttributeDict

    def stack_key(self) -> tuple | None: ...

    def renewed(self, seed: int) -> Stackable: ...

    def steps(self, params, device, clip_with=None): ...

    def schedule(self, n: int, generator, device) -> list: ...

    def linear_start(self, seed: int, out=None, generator=None) -> tuple[Tensor, Tensor]: ...

    def _linear_layer(self) -> torch.nn.Linear | None: ...


def concurrency_key(learner) -> tuple | None:
    """Learners with equal keys can be fitted together (:meth:`Stackable.stack_key`); ``None`` means fit alone (not a
    :class:`Stackable`: a scikit-learn one). Kept with the learner and its renewed copies once computed."""
    kept = getattr(learner, "__dict__", {})
    if "_concurrency_key" not in kept:
        if not isinstance(learner, Stackable):
            return None
        learner._concurrency_key = learner.stack_key()
    return learner._concurrency_key


def linear_outputs(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """``x Wᵀ + b`` in one ``addmm``: a Linear learner's prediction, whether it keeps a module or only its tensors
    (:class:`LinearRound`), so both give the same numbers."""
    return torch.addmm(bias, x, weight.t())


def _first_linear(net: torch.nn.Module) -> tuple[str, torch.nn.Module]:
    return next((n, m) for n, m in net.named_modules() if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)))


def _padded_net(learner, width: int | None) -> torch.nn.Module:
    """The learner's network, or (narrower than ``width``) a copy whose first Linear layer takes ``width`` inputs,
    the extra weights zero. Stacking copies the parameters, so the network itself is never changed here."""
    name, first = _first_linear(learner.net)
    if width is None or not isinstance(first, torch.nn.Linear) or first.in_features >= width:
        return learner.net
    net = copy.deepcopy(learner.net)
    name, first = _first_linear(net)
    wide = torch.nn.Linear(width, first.out_features, device=first.weight.device)
    with torch.no_grad():
        wide.weight.zero_()
        wide.weight[:, : first.in_features] = first.weight
        wide.bias.copy_(first.bias)
    net.set_submodule(name, wide)
    return net


def fit_concurrently(
    learners: list,
    features: list[Tensor],
    targets: Tensor,
    sample_weight: Tensor | None = None,
) -> list:
    """Train ``learners[m]`` on ``(features[m], targets)`` for every m at once; returns the learners."""
    _check_together(learners)
    fit_stacked(learners, features, targets, sample_weight)
    return learners


def _check_together(learners: list) -> None:
    keys = {concurrency_key(lr) for lr in learners}
    if len(keys) != 1 or None in keys:
        raise ValueError("fit_concurrently needs fast-engine ResidualRegressors with equal hyper-parameters.")


def fit_and_predict(
    learners: list,
    inputs: list[dict[str, Tensor]],
    targets: Tensor,
    sample_weight: Tensor | None = None,
    stacked: dict | None = None,
) -> dict[str, Tensor]:
    """Train ``learners[m]`` on ``(inputs[m]["train"], targets)`` for every m at once, then predict every split of
    ``inputs[m]``: {split: (M, N, K)} float32. ``stacked``: a dict the caller keeps across rounds (:func:`_padded`)."""
    _check_together(learners)
    linear = fit_stacked(learners, [i["train"] for i in inputs], targets, sample_weight, stacked)
    if linear is None:
        return {s: torch.stack([lr.predict(i[s]) for lr, i in zip(learners, inputs, strict=True)]) for s in inputs[0]}
    return _linear_outputs(*linear, inputs, stacked)


def fit_linear_rounds(
    prototypes: list,
    seeds: list[int],
    inputs: list[dict[str, Tensor]],
    targets: Tensor,
    stacked: dict | None = None,
) -> tuple[list[LinearRound], dict[str, Tensor]]:
    """:func:`fit_and_predict` for fp32 Linear learners never made (:attr:`ResidualRegressor.linear_drawn`): each
    ``prototypes[m].renewed(seeds[m])`` drawn, trained together, kept as a :class:`LinearRound`; with the outputs."""
    m, k = len(prototypes), targets.shape[1]
    dims = [i["train"].shape[1] for i in inputs]
    width = max(dims)
    weights, biases, generator = torch.zeros(m, k, width), torch.empty(m, k), torch.Generator()
    for prototype, seed, d, weight, bias in zip(prototypes, seeds, dims, weights, biases, strict=True):
        own = weight if d == width else torch.empty(k, d)  # drawn into the block where it is a whole row
        prototype.linear_start(seed, out=(own, bias), generator=generator)
        if d < width:
            weight[:, :d] = own
    start = torch.cat([weights.transpose(1, 2), biases.unsqueeze(1)], 1)  # [Wᵀ; 0; b] of each, M × (width+1) × K
    theta, x = _fit_linear(prototypes[0], seeds, inputs, targets, None, stacked, start)
    rounds = [  # each its own memory (a d = 1 slice made contiguous would be a view of every organization's)
        LinearRound(prototype, seed, own[:d].t().clone(memory_format=torch.contiguous_format), own[-1].clone())
        for prototype, seed, own, d in zip(prototypes, seeds, theta, dims, strict=True)
    ]
    return rounds, _linear_outputs(theta, x, inputs, stacked)


def _linear_outputs(theta: Tensor, x: Tensor, inputs: list[dict[str, Tensor]], stacked) -> dict[str, Tensor]:
    """Every split's outputs of the stacked Linear models ``theta`` (M × (d+1) × K): one batched product each."""
    return {
        s: linear_map(x if s == "train" else _stacked_split(inputs, s, x.shape[-1], stacked), theta) for s in inputs[0]
    }


def fit_stacked(learners, features, targets, sample_weight=None, stacked=None) -> tuple[Tensor, Tensor] | None:
    """Fit stackable learners of one architecture and hyper-parameters (but seeds and input widths) together; for
    Linear learners returns their trained ``[Wᵀ; 0; b]`` stack and padded training inputs, else None."""
    for learner in learners:
        learner.train()
    hp = learners[0].hparams
    device = targets.device
    n, m = targets.shape[0], len(learners)
    seeds = [lr.hparams.seed for lr in learners]
    if learners[0]._linear_layer() is not None and features[0].dim() == 2:
        layers = [lr.to(device)._linear_layer() for lr in learners]
        width = max(f.shape[1] for f in features)
        start = torch.stack([stacked_theta(layer, width) for layer in layers])  # [Wᵀ; 0; b] of each, M × (width+1) × K
        theta, x = _fit_linear(learners[0], seeds, features, targets, sample_weight, stacked, start)
        load_theta(theta, layers)
        return theta, x
    y_all = targets.expand(m, *targets.shape)
    w_all = None if sample_weight is None else sample_weight.expand(m, n)
    if features[0].dim() == 2:  # rows: zero-pad to the widest organization
        width = max(f.shape[1] for f in features)
        x = _padded(features, width, stacked)  # M,N,d
    else:  # images of one shape
        width = None
        x = torch.stack(features)  # M,N,C,H,W
    schedule, blocks = _order(learners[0], seeds, n, device)
    if blocks is not None:
        x, y_all, w_all = blocks.gather(x, y_all, w_all)
    nets = [_padded_net(lr.to(device), width) for lr in learners]
    params, buffers = stack_module_state(nets)
    base = copy.deepcopy(nets[0]).to("meta")
    stacked = _stacked_forward(base) if hp.precision == "32-true" else None  # autocast casts vmap's linear its way
    forward = stacked or vmap(lambda p, b, xi: functional_call(base, (p, b), (xi,)))
    steps = learners[0].steps(params.values(), device, clip_with=_clip_per_model)

    def loss(epoch: int, idx) -> Tensor:
        wb = None if w_all is None else own_rows(w_all, idx)
        return local_loss(forward(params, buffers, own_rows(x, idx)).float(), own_rows(y_all, idx), hp.loss, wb)

    train_epochs(steps, hp.epochs, schedule, loss, models=m)
    with torch.no_grad():
        for i, lr in enumerate(learners):
            for name, p in (*lr.net.named_parameters(), *lr.net.named_buffers()):
                stacked = params[name][i] if name in params else buffers[name][i]
                p.copy_(stacked[tuple(slice(0, d) for d in p.shape)])  # drop the zero padding
    return None


BLOCKS = 0xB10C  # the purpose tag of the blocks' order (learner.shuffle: blocks): derived_seed(BLOCKS, n, batch)


class BlockOrder:
    """``learner.shuffle: blocks`` (docs/design.md, "Training"): each model's rows permuted once per fit, then each
    epoch the same contiguous batches for every model, in a fresh order. A last batch under ``min_rows`` is left out."""

    def __init__(self, n: int, batch_size: int, generators: list[torch.Generator], min_rows: int = 1):
        dtype = torch.int32 if n < 2**31 else torch.long  # own_rows widens its flat row numbers if need be
        self.rows = permutations(n, generators, 1, dtype)[0]
        starts = range(0, n, batch_size)
        self.batches = [slice(s, min(s + batch_size, n)) for s in starts if min(s + batch_size, n) - s >= min_rows]
        self.generator = torch.Generator().manual_seed(derived_seed(BLOCKS, n, batch_size))

    def epoch(self) -> list[slice]:
        """The next epoch's batches: every kept batch once, in a fresh order."""
        return [self.batches[i] for i in torch.randperm(len(self.batches), generator=self.generator).tolist()]

    def gather(self, *stacks: Tensor | None) -> list[Tensor | None]:
        """Each stack (M, N, ...; one tensor expanded is read as one) with each model's rows in its order: one
        gather each, for fits that read the rows at every step (an ℓ₂ linear fit needs only its batches' sums)."""
        rows = self.rows.to(next(t for t in stacks if t is not None).device)
        return [None if t is None else own_rows(t, rows) for t in stacks]


def _order(learner, seeds: list[int], n: int, device) -> tuple[Callable[[int], list], BlockOrder | None]:
    """The fit's batches (a function of the epoch) and, under ``learner.shuffle: blocks`` (:class:`BlockOrder`, more
    rows than a batch), the order whose slices they are; else the rows' order (:func:`_schedule`) and None."""
    hp = learner.hparams
    if hp.get("shuffle", "rows") != "blocks" or n <= hp.batch_size:
        return _schedule(learner, seeds, n, device), None
    min_rows = 2 if hp.arch == "cnn" else 1  # BatchNorm cannot train on a single row
    order = BlockOrder(n, hp.batch_size, [torch.Generator().manual_seed(s) for s in seeds], min_rows)
    return (lambda epoch: order.epoch()), order


PERMUTATION_BYTES = 64 * 2**20  # the most one block of drawn permutations holds (its epochs are drawn at once)


def _schedule(learner, seeds: list[int], n: int, device) -> Callable[[int], list]:
    """An epoch's minibatches of every organization, as each learner with its own seed would draw them alone: row
    indices (M, B), or slices when batches are in order. Permutations are drawn as many epochs at a time as fit in
    ``PERMUTATION_BYTES``, each generator continuing its stream: the numbers drawn all at once, in bounded memory."""
    block: dict[int, Tensor] = {}
    gens: list[torch.Generator] = []
    in_order: list = []  # the epochs' batches once they are known to be in order (nothing drawn)
    dtype = torch.int32 if n < 2**31 else torch.long  # own_rows widens its flat row numbers if need be

    def drawn(epoch: int) -> Tensor:  # this epoch's permutations, drawing the next block when it starts
        if epoch not in block:
            if not gens:
                gens.extend(torch.Generator(device="cpu").manual_seed(seed) for seed in seeds)
            per_epoch = len(seeds) * n * torch.empty((), dtype=dtype).element_size()
            count = max(1, min(learner.hparams.epochs - epoch, PERMUTATION_BYTES // per_epoch))
            block.clear()
            block.update(enumerate(permutations(n, gens, count, dtype), start=epoch))
        return block[epoch]

    def schedule(epoch: int) -> list:
        if in_order:
            return in_order
        pieces = learner.schedule(n, lambda: drawn(epoch), device)
        if not pieces or isinstance(pieces[0], slice):  # in order, nothing drawn: the same for all epochs
            in_order.extend(pieces)
        return pieces

    return schedule


def _padded(features: list[Tensor], width: int, stacked: dict | None = None) -> Tensor:
    """Rows zero-padded to ``width`` columns, stacked: M × N × width, kept in ``stacked`` (:func:`_keep`); a single
    learner's rows of that width are a view of them."""
    if len(features) == 1 and features[0].shape[1] == width and features[0].is_contiguous():
        return features[0].unsqueeze(0)  # one learner's own rows, as they are: no copy
    key = (width, *map(id, features))
    if stacked is not None and key in stacked:
        kept, versions, x = stacked[key]
        if all(f is k and f._version == v for f, k, v in zip(features, kept, versions, strict=True)):
            return x
    x = features[0].new_zeros(len(features), features[0].shape[0], width)
    for m, f in enumerate(features):
        x[m, :, : f.shape[1]] = f
    if stacked is not None:
        _keep(stacked, features, x)
    return x


def _keep(stacked: dict, features: list[Tensor], x: Tensor) -> None:
    """Keep the stack ``x`` of ``features`` in ``stacked`` (its last four), found again while they are the same,
    unchanged tensors (:func:`_padded`)."""
    while len(stacked) >= 4:
        stacked.pop(next(iter(stacked)))
    stacked[(x.shape[-1], *map(id, features))] = (list(features), [f._version for f in features], x)


def _stacked_split(inputs: list[dict[str, Tensor]], split: str, width: int, stacked: dict | None) -> Tensor:
    """The organizations' rows of ``split`` zero-padded to the widest, kept in ``stacked``; each ``inputs[m][split]``
    then becomes a view of its place in the stack, so a table is held once (docs/design.md, "Data at scale")."""
    key = (width, *(id(i[split]) for i in inputs))
    if stacked is None or key in stacked:
        return _padded([i[split] for i in inputs], width, stacked)  # the stack kept (its own check), or a new one
    first = inputs[0][split]
    x = first.new_empty(len(inputs), first.shape[0], width)
    for m, own in enumerate(inputs):  # one at a time: each organization's rows go as its place in the stack fills
        d = own[split].shape[1]
        x[m, :, :d] = own[split]
        x[m, :, d:] = 0.0
        own[split] = x[m, :, :d]
    _keep(stacked, [own[split] for own in inputs], x)
    return x


def _fit_linear(learner, seeds, features, targets, sample_weight, stacked, start: Tensor) -> tuple[Tensor, Tensor]:
    """Linear models of ``learner``'s hyper-parameters but ``seeds``, from ``start`` (``[Wᵀ; 0; b]``, M × (d+1) × K),
    trained together (closed-form gradients) on ``features`` (rows or splits); returns them and the padded inputs."""
    hp, device = learner.hparams, targets.device
    if isinstance(features[0], dict):
        width = max(f["train"].shape[1] for f in features)
        x = _stacked_split(features, "train", width, stacked)
    else:
        width = max(f.shape[1] for f in features)
        x = _padded(features, width, stacked)
    theta = start.detach().to(device)
    n, m = targets.shape[0], len(seeds)
    schedule, blocks = _order(learner, seeds, n, device)
    xs, y, w = x, targets, sample_weight  # every model reads the shared targets (N × K) and weights
    if blocks is not None and hp.loss != "l2":  # its steps read the rows: gathered once in each model's order
        w = None if w is None else w.expand(m, n)
        xs, y, w = blocks.gather(x, targets.expand(m, *targets.shape), w)
        blocks = None  # the slices index the gathered rows
    steps = lambda p: learner.steps(p, device, clip_with=_clip_per_model)  # noqa: E731
    linear = LinearSteps(theta, steps, xs, y, hp.loss, w, blocks=blocks)

    def batches(epoch: int) -> list:
        return linear.epoch(schedule(epoch))

    train_epochs(linear.steps, hp.epochs, batches, lambda epoch, batch: linear.step(batch), models=len(seeds))
    return linear.theta.detach(), x


def _stacked_forward(base: torch.nn.Module):
    """For an MLP (``nn.Sequential`` of Linear layers and parameter-free activations): the M networks' forward as one
    ``baddbmm`` per layer, bit for bit what ``vmap`` computes without its overhead. None otherwise."""
    layers: list = []

    def chain(module: torch.nn.Module, prefix: str) -> bool:  # nested Sequentials in order (extractor, head)
        if isinstance(module, torch.nn.Sequential):
            return all(chain(child, f"{prefix}{name}.") for name, child in module.named_children())
        if isinstance(module, torch.nn.Linear) and module.bias is not None:
            layers.append((f"{prefix}weight", f"{prefix}bias"))
            return True
        if isinstance(module, (torch.nn.ReLU, torch.nn.Tanh, torch.nn.Sigmoid, torch.nn.Identity)):
            layers.append(module)
            return True
        return False

    if not chain(base, ""):
        return None

    def forward(params: dict, buffers: dict, x: Tensor) -> Tensor:
        for layer in layers:
            if isinstance(layer, tuple):
                weight, bias = params[layer[0]], params[layer[1]]
                x = torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))
            else:
                x = layer(x)
        return x

    return forward


def _clip_per_model(params: list[Tensor], max_norm: float) -> None:
    """``clip_grad_norm_`` applied to each organization's slice of the stacked parameters (one norm a slice for a
    linear model's one parameter: a step of its takes a few calls)."""
    grads = [p.grad for p in params if p.grad is not None]
    if len(grads) == 1 and grads[0].dim() > 1:
        norm = torch.linalg.vector_norm(grads[0], dim=tuple(range(1, grads[0].dim())), keepdim=True)
    else:
        norm = sum(g.pow(2).flatten(1).sum(1) for g in grads).sqrt()
    coef = norm.add_(1e-6).reciprocal_().mul_(max_norm).clamp_(max=1.0)  # max_norm / (norm + 1e-6), as torch's
    for g in grads:
        g.mul_(coef if coef.dim() == g.dim() else coef.view(-1, *([1] * (g.dim() - 1))))


def fit_jobs(jobs: list, concurrent: bool, stacked: dict | None = None) -> None:
    """Fit every :class:`vcl.methods.organization.FitJob`; if ``concurrent``, jobs with the same targets and learner
    architecture go in one pass, also giving each its outputs and training loss (``stacked``: as fit_and_predict)."""
    groups: dict[object, list] = {}
    for i, job in enumerate(jobs):
        key = concurrency_key(job.prototype if job.learner is None else job.learner) if concurrent else None
        groups.setdefault((key, id(job.targets)) if key is not None else i, []).append(job)
    for group in groups.values():
        first, inputs = group[0], [j.inputs for j in group]
        if len(group) == 1:
            first.built().fit(first.features, first.targets)
            continue
        if first.features.dim() == 2 and all(j.learner is None and j.prototype.linear_drawn for j in group):
            prototypes, seeds = [j.prototype for j in group], [j.seed for j in group]
            rounds, outputs = fit_linear_rounds(prototypes, seeds, inputs, first.targets, stacked)
            for job, model in zip(group, rounds, strict=True):
                job.learner = model
        else:
            outputs = fit_and_predict([j.built() for j in group], inputs, first.targets, stacked=stacked)
        loss = first.learner.hparams.loss  # each model's alone: its temporaries N × K, not M × N × K (GBs at 10^7)
        losses = torch.stack([local_losses(out, first.targets, loss) for out in outputs["train"]]).tolist()
        for m, job in enumerate(group):
            job.outputs, job.train_loss = {split: out[m] for split, out in outputs.items()}, losses[m]


class LinearRound:
    """A Linear learner's round model as its weight (K × d) and bias (K), what ``prototype.renewed(seed)`` holds
    after the same fit; it predicts and gives ``parameters`` and ``state_dict`` (the learner's keys) as it does."""

    def __init__(self, prototype, seed: int, weight: Tensor, bias: Tensor):
        self.prototype, self.seed, self.weight, self.bias = prototype, seed, weight, bias

    @property
    def hparams(self) -> AttributeDict:
        return AttributeDict({**self.prototype.hparams, "seed": self.seed})

    @property
    def device(self) -> torch.device:
        return self.weight.device

    @torch.no_grad()
    def predict(self, features: Tensor) -> Tensor:
        """``x Wᵀ + b``: what the learner predicts (:meth:`ResidualRegressor.predict`), by the same function."""
        return linear_outputs(features.to(self.device), self.weight, self.bias)

    def parameters(self):
        return iter((self.weight, self.bias))

    def state_dict(self) -> OrderedDict:
        template = self.prototype.__dict__.get("_state_template")
        if template is None:  # the learner's keys and version metadata, once per prototype
            template = self.prototype.__dict__["_state_template"] = self.prototype.state_dict()
        state = OrderedDict(zip(template, (self.weight, self.bias), strict=True))
        state._metadata = template._metadata
        return state
