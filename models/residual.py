"""Residual-fitting LightningModules: Linear, MLP, CNN and LSTM regressors with the GAL paper's defaults.

A :class:`ResidualRegressor` is a ``pytorch_lightning.LightningModule``: ``forward``, ``training_step`` (the
local loss on an ``(x, target, weight)`` batch) and ``configure_optimizers`` (the paper's optimizer and
schedule) are the module's own, and a bare ``pl.Trainer(...).fit(learner, party_datamodule)`` trains it. The
suite uses it through ``fit(features, targets, sample_weight=None)`` and ``predict(features)``, under one of two
engines that drive the same module:

- ``fast`` (default): data stays on its device as whole tensors and vcl's one training loop
  (:func:`vcl.engine.loop.train_epochs`) steps the module's own loss and optimizer there — what tabular data this small
  needs (the authors' per-sample DataLoader spends half its time in Python) and what keeps a GPU busy on
  images; mixed precision by ``precision``. Linear, MLP and CNN learners take the stacked fit
  (:func:`vcl.engine.concurrent.fit_stacked`, alone or with other organizations'), the others their own
  :meth:`~ResidualRegressor.training_step` batch by batch;
- ``trainer``: ``pytorch_lightning.Trainer.fit`` on a party data module
  (:class:`vcl.datamodules.PartyDataModule`), for data or hardware that needs Lightning's machinery
  (accelerators, devices, precision, strategies, callbacks, loggers).

With full batches both engines take the same optimizer steps (a test holds them equal).
"""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
from collections import OrderedDict

import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import TensorBoardLogger
from pytorch_lightning.utilities.parsing import AttributeDict
from torch import Tensor, nn
from vcl.datamodules.view import PartyDataModule
from vcl.models.networks import build_network, single_linear
from vcl.models.user import build_callbacks, build_module, one_optimizer

from vcl.engine import progress
from vcl.engine.concurrent import fit_stacked, linear_outputs
from vcl.engine.loop import (
    DRAWS,
    PRECISIONS,
    Steps,
    autocast,
    build_optimizer,
    derived_seed,
    minibatches,
    seeded_draws,
    seeded_init,
    train_epochs,
)
from vcl.engine.losses import check_local_loss, local_loss


def _resettable(net: nn.Module) -> bool:
    """Every module holding parameters or buffers itself draws or sets them all in its ``reset_parameters`` and
    keeps no other reference to them: Linear, Conv and BatchNorm layers, and parameter-free ones (activations,
    pooling, containers). Not an LSTM (it keeps its own list of its weights)."""
    kinds = (nn.Linear, nn.Conv2d, nn.BatchNorm2d, nn.BatchNorm1d)
    return all(isinstance(m, kinds) or not (m._parameters or m._buffers) for m in net.modules())


_CONTAINERS = (dict, OrderedDict, set, list)
_SHARED = (  # the hyper-parameters learners fitted in one stacked fit share (all but the seed and input width)
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
    "shuffle",
    "grad_clip",
    "engine",
    "arch",
    "optimizer",
    "widths",
    "last_pool",
    "precision",
)
_LEAKY_RELU_GAIN = math.sqrt(2.0 / (1 + math.sqrt(5) ** 2))  # init.calculate_gain("leaky_relu", √5)


class _Renewal:
    """How :meth:`ResidualRegressor.renewed` copies a prototype's module tree, worked out once per prototype: per
    module (in the order of ``Module.modules()``) its class, its attributes (containers of hooks and names to copy,
    none shared), its parameters' and buffers' shapes, and its children. A copy gets new, uninitialised
    parameters and buffers on the CPU and is in training mode; no tensor data is copied. When every layer holding
    parameters is an ``nn.Linear`` with inputs, the copy's parameters are drawn as it makes them, with
    ``nn.Linear.reset_parameters``' arithmetic (``kaiming_uniform_(W, a=√5)``, then b uniform in ±1/√fan_in) from
    one generator seeded as torch's generator is seeded for construction: the draws construction makes (tested)."""

    def __init__(self, root: nn.Module):
        modules = list(root.modules())
        index = {id(m): i for i, m in enumerate(modules)}
        self.layers = [i for i, m in enumerate(modules) if hasattr(type(m), "reset_parameters")]
        self.draws = all(type(modules[i]) is nn.Linear and modules[i].in_features > 0 for i in self.layers)
        self.plan = []
        for m in modules:
            state = {k: v for k, v in m.__dict__.items() if k not in ("_parameters", "_buffers", "_modules")}
            state["training"] = True
            containers = [k for k, v in state.items() if type(v) in _CONTAINERS]
            bounds = {}
            if self.draws and type(m) is nn.Linear:
                fan_in = math.sqrt(m.in_features)
                bounds = {"weight": math.sqrt(3.0) * (_LEAKY_RELU_GAIN / fan_in), "bias": 1 / fan_in}
            params = [
                (k, None if v is None else (v.shape, v.dtype, v.requires_grad, bounds.get(k)))
                for k, v in m._parameters.items()
            ]
            buffers = [(k, None if v is None else (v.shape, v.dtype)) for k, v in m._buffers.items()]
            children = [(k, None if c is None else index[id(c)]) for k, c in m._modules.items()]
            self.plan.append((type(m), state, containers, params, buffers, children))
        self.specs = [p for *_, params, _, _ in self.plan for _, p in params if p]  # every parameter, in order

    def copy(self, seed: int) -> nn.Module:
        generator = torch.Generator().manual_seed(seed) if self.draws else None
        made = []
        for cls, state, containers, params, buffers, _ in self.plan:
            new = object.__new__(cls)
            d = new.__dict__
            d.update(state)
            for k in containers:
                d[k] = state[k].copy()
            d["_parameters"] = {k: None if p is None else self._parameter(*p, generator) for k, p in params}
            d["_buffers"] = {k: None if b is None else torch.empty(b[0], dtype=b[1]) for k, b in buffers}
            made.append(new)
        for new, (_, _, _, _, _, children) in zip(made, self.plan, strict=True):
            new.__dict__["_modules"] = {k: None if i is None else made[i] for k, i in children}
        if not self.draws:
            with seeded_init(seed):
                for i in self.layers:
                    made[i].reset_parameters()
        return made[0]

    def drawn(self, seed: int, out: tuple | None = None, generator: torch.Generator | None = None) -> list[Tensor]:
        """The parameters a copy with ``seed`` gets, in order, without the copy (only where they are drawn); into
        ``out`` (contiguous tensors of their shapes, e.g. rows of a block of many copies' parameters) if given,
        drawing from ``generator`` (seeded here) if given."""
        generator = (generator or torch.Generator()).manual_seed(seed)
        if out is None:
            return [self._tensor(p[0], p[1], p[3], generator) for p in self.specs]
        for t, p in zip(out, self.specs, strict=True):
            if t.shape != p[0] or t.dtype != p[1] or not t.is_contiguous():
                raise ValueError(f"drawn: out needs a contiguous {p[1]} tensor of shape {tuple(p[0])}.")
            if p[3] is not None:
                t.uniform_(-p[3], p[3], generator=generator)
        return list(out)

    @staticmethod
    def _tensor(shape, dtype, bound: float | None, generator) -> Tensor:
        data = torch.empty(shape, dtype=dtype)
        if bound is not None:
            data.uniform_(-bound, bound, generator=generator)
        return data

    @classmethod
    def _parameter(cls, shape, dtype, requires_grad: bool, bound: float | None, generator) -> nn.Parameter:
        return nn.Parameter(cls._tensor(shape, dtype, bound, generator), requires_grad)


class ResidualRegressor(pl.LightningModule):
    """A regressor of Alice's pseudo-residual under a local loss: Linear/MLP on rows, CNN on images, LSTM on
    sequences (``arch``; :func:`vcl.models.networks.build_network`). ``in_features`` is the width of a row or the
    shape of one example."""

    def __init__(
        self,
        in_features: int | tuple[int, ...],
        out_features: int,
        hidden: tuple[int, ...] = (),
        loss: str = "l2",
        lr: float = 0.1,
        momentum: float = 0.9,
        weight_decay: float = 5e-4,
        epochs: int = 100,
        milestones: tuple[int, ...] = (50,),
        gamma: float = 0.1,
        batch_size: int = 1024,
        shuffle: str = "rows",
        grad_clip: float = 1.0,
        seed: int = 0,
        engine: str = "fast",
        accelerator: str = "auto",
        devices: int | str = 1,
        precision: str = "32-true",
        arch: str = "mlp",
        optimizer: str = "sgd",
        widths: tuple[int, ...] = (64, 128, 256, 512),
        lstm_hidden: int = 128,
        dropout: float = 0.3,
        strategy: str = "auto",
        last_pool: bool = True,
        module: str = "",
    ):
        hparams = AttributeDict(locals())  # the arguments, first thing: nothing else is local yet
        del hparams["self"]
        hparams.pop("__class__", None)
        super().__init__()
        check_local_loss(loss, "loss")
        if engine not in ("fast", "trainer"):
            raise ValueError(f"run.engine={engine!r}; use 'fast' or 'trainer'.")
        if precision not in PRECISIONS:
            raise ValueError(f"run.precision={precision!r}; use one of {', '.join(PRECISIONS)}.")
        in_shape = (in_features,) if isinstance(in_features, int) else tuple(in_features)
        self.save_hyperparameters(hparams, logger=False)
        with seeded_init(seed):
            self.net = self.build_net(in_shape, out_features)
        plain = type(self).forward is ResidualRegressor.forward and type(self).loss_on is ResidualRegressor.loss_on
        plain = plain and arch != "module"  # a user's module: its own forward, never rewritten
        self._linear = single_linear(self.net) if plain and precision == "32-true" else None  # its name
        self._renewable = plain and _resettable(self.net)  # renewed() may copy its modules
        self._plain = plain
        self.fit_options: dict = {}  # engine trainer: this fit's logger folder and callbacks (set by its organization)

    def renewed(self, seed: int) -> ResidualRegressor:
        """A fresh learner of this one's hyper-parameters but ``seed``: equal to ``ResidualRegressor(**hparams,
        seed=seed)`` (tested), parameters drawn as construction draws them, without building its modules again (a
        round with many organizations builds many learners). Nothing is shared with this one."""
        if type(self) is not ResidualRegressor or not self._renewable:
            return type(self)(**{**self.hparams, "seed": seed})
        new = self._renewal_plan().copy(seed)
        new.__dict__["_hparams"] = AttributeDict({**self.hparams, "seed": seed})
        new.__dict__["_hparams_initial"] = AttributeDict(new.__dict__["_hparams"])
        return new

    def _renewal_plan(self) -> _Renewal:
        renewal = self.__dict__.get("_renewal")
        if renewal is None:
            renewal = self.__dict__["_renewal"] = _Renewal(self)
        return renewal

    @property
    def linear_drawn(self) -> bool:
        """One Linear layer trained in fp32 whose copies draw their parameters as they are made
        (:meth:`linear_start`)."""
        plain = type(self) is ResidualRegressor and self._linear is not None and self._renewable
        return plain and self._renewal_plan().draws

    def linear_start(
        self, seed: int, out: tuple[Tensor, Tensor] | None = None, generator: torch.Generator | None = None
    ) -> tuple[Tensor, Tensor]:
        """The weight and bias ``renewed(seed)`` starts from (on the CPU), drawn without making it
        (:attr:`linear_drawn` learners); into ``out`` and from ``generator`` if given (:meth:`_Renewal.drawn`)."""
        if not self.linear_drawn:
            raise ValueError("linear_start needs a learner of one Linear layer in fp32 (linear_drawn).")
        return tuple(self._renewal_plan().drawn(seed, out, generator))

    def build_net(self, in_shape: tuple[int, ...], out_features: int) -> nn.Module:
        hp = self.hparams
        if hp.arch == "module":  # the user's own LightningModule (vcl.models.user)
            return build_module(hp.module, in_shape, out_features)
        return build_network(
            hp.arch,
            in_shape,
            out_features,
            tuple(hp.hidden),
            tuple(hp.widths),
            hp.lstm_hidden,
            hp.dropout,
            hp.last_pool,
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    @property
    def device(self) -> torch.device:
        """Where the parameters are (the CPU for a network without any)."""
        p = next(self.parameters(), None)
        return p.device if p is not None else torch.device("cpu")

    def loss_on(self, batch) -> Tensor:
        """The local loss on a batch ``(x, target)`` or ``(x, target, sample weight)``."""
        x, y, *w = batch
        return local_loss(self(x), y, self.hparams.loss, w[0] if w else None)

    # --- the LightningModule hooks (Lightning's Trainer; the fast engine steps the same loss and optimizer) ----
    def training_step(self, batch, batch_idx: int) -> Tensor | None:
        """The local loss on a batch; a user's module that defines its own ``training_step`` gets the batch as
        ``(x, target, sample weight)`` (weights of one where the method weighs no rows) and its result is the
        loss (a tensor, a dict with ``"loss"``, or None to skip the batch), under either engine."""
        if self._own_training_step():
            return self._user_step(batch, batch_idx)
        loss = self.loss_on(batch)
        if self._trainer is not None:  # under a Trainer: its loggers get the epoch's mean
            self.log("train_loss", loss, on_epoch=True, on_step=False, batch_size=batch[0].shape[0])
        return loss

    def validation_step(self, batch, batch_idx: int) -> Tensor | None:
        """The local loss on a party's validation rows, when its view holds their targets (Alice's labels)."""
        if len(batch) < 2:
            return None
        loss = self.loss_on(batch)
        self.log("val_loss", loss, batch_size=batch[0].shape[0])
        return loss

    def _own_training_step(self) -> bool:
        if self.hparams.arch != "module":  # a built-in network: the organization's loss
            return False
        return getattr(type(self.net), "training_step", None) is not pl.LightningModule.training_step

    def _user_step(self, batch, batch_idx: int) -> Tensor | None:
        x, y, *w = batch
        weight = w[0] if w and w[0] is not None else x.new_ones(x.shape[0])
        self.net._current_fx_name = self._current_fx_name  # under a Trainer its self.log() reaches the loggers
        out = self.net.training_step((x, y, weight), batch_idx)
        return out.get("loss") if isinstance(out, dict) else out

    def on_fit_start(self) -> None:
        self.train()  # a learner that predicted before (eval mode) trains in training mode

    def configure_optimizers(self):
        """The paper's optimizer and schedule for this learner (torch.optim's classes, which the fast engine's own
        steps equal: :func:`vcl.engine.loop.build_optimizer`)."""
        if self._own_optimizers():
            return self.net.configure_optimizers()
        steps = self.steps(self.parameters(), self.device)
        return {"optimizer": steps.optimizer, "lr_scheduler": {"scheduler": steps.scheduler, "interval": "epoch"}}

    # --- the learner interface ----------------------------------------------------------------
    @property
    def fit_index(self) -> int:
        """Which fit of this learner the next one is (always 0: a fresh learner per round and organization)."""
        return 0

    def draw_seed(self) -> int:
        """The seed of the next fit's dropout draws: the learner's seed (from the run seed, round and
        organization) and its fit index, both restored with a checkpoint, so a resumed run draws the same."""
        return derived_seed(self.hparams.seed, DRAWS, self.fit_index)

    def fit(self, features: Tensor, targets: Tensor, sample_weight: Tensor | None = None):
        self.to(features.device)
        with seeded_draws(self.draw_seed(), features.device):
            if self.hparams.engine == "trainer":
                self._fit_trainer(features, targets, sample_weight)
            else:
                self._fit_fast(features, targets, sample_weight)
        return self

    @torch.no_grad()
    def predict(self, features: Tensor, chunk: int = 4096) -> Tensor:
        """Outputs in float32, computed ``chunk`` rows at a time (images of a whole split need not fit at once)."""
        x = features.to(self.device)
        layer = self._linear_layer()
        if layer is not None:  # x Wᵀ + b: the network's one operation, without its modules' calls
            return linear_outputs(x, layer.weight, layer.bias)
        self.eval()
        with self._autocast(x.device):
            return torch.cat([self(x[i : i + chunk]).float() for i in range(0, x.shape[0], chunk)])

    def _autocast(self, device: torch.device):
        """Mixed precision for the fast engine: bf16 (``bf16-mixed``) or fp16 (``16-mixed``) autocast."""
        return autocast(self.hparams.precision, device)

    def steps(self, params, device, clip_with=None) -> Steps:
        """This learner's optimizer and schedule over ``params`` (``torch.optim``'s), with its clipping and
        precision; a user's module's own when it defines ``configure_optimizers``."""
        hp = self.hparams
        if self._own_optimizers():
            opt, sched = one_optimizer(self.net.configure_optimizers(), hp.module)
        else:
            opt, sched = build_optimizer(
                params, hp.lr, hp.momentum, hp.weight_decay, hp.milestones, hp.gamma, hp.optimizer, hp.precision
            )
        return Steps(opt, sched, clip=hp.grad_clip, precision=hp.precision, device=device, clip_with=clip_with)

    def _own_optimizers(self) -> bool:
        """A user's module that defines its own ``configure_optimizers``."""
        own = getattr(type(self.net), "configure_optimizers", None)
        return self.hparams.arch == "module" and own is not pl.LightningModule.configure_optimizers

    def schedule(self, n: int, generator, device) -> list:
        """An epoch's minibatches: in order when one batch holds every row, else shuffled by ``generator`` (or by
        each of several learners' generators, or those a function returns: :func:`vcl.engine.loop.minibatches`)."""
        hp = self.hparams
        min_rows = 2 if hp.arch == "cnn" else 1  # BatchNorm cannot train on a single row
        return minibatches(n, hp.batch_size, generator, shuffle=n > hp.batch_size, min_rows=min_rows, device=device)

    @property
    def stackable(self) -> bool:
        """Fitted by the stacked fit (:func:`vcl.engine.concurrent.fit_stacked`), alone or with others: the fast
        engine, this class's own forward and loss, and a network ``vmap`` can batch without changing its draws —
        not an LSTM (no batching rule for ``aten::lstm``), not a user's module (its own code), no active dropout
        (under ``vmap`` every organization's masks would come from one generator). Others take
        :meth:`training_step` batch by batch."""
        hp = self.hparams
        if hp.engine != "fast" or not self._plain or hp.arch == "lstm":
            return False
        return not any(isinstance(m, nn.Dropout) and m.p > 0 for m in self.net.modules())

    def stack_key(self) -> tuple | None:
        """Learners with equal keys can be fitted in one stacked fit; None: fitted alone (a subclass's learners
        are). MLPs on rows of different widths share a key (inputs are zero-padded); CNNs need equal input
        shapes."""
        if type(self) is not ResidualRegressor or not self.stackable:
            return None
        hp = self.hparams
        shape = () if hp.arch == "mlp" and isinstance(hp.in_features, int) else ("in_features", str(hp.in_features))
        return tuple((k, str(hp[k])) for k in _SHARED) + shape

    def _fit_fast(self, x: Tensor, y: Tensor, w: Tensor | None) -> None:
        """Minibatch SGD with the data resident on its device (no DataLoader, no host round trips per step): the
        stacked fit of one learner where it applies (:attr:`stackable`: Linear learners take closed-form steps),
        else the module's own :meth:`training_step` on each minibatch, stepped by vcl's loop."""
        if self.stackable:
            fit_stacked([self], [x], y, w)
            return
        self.train()
        gen = torch.Generator(device="cpu").manual_seed(self.hparams.seed)
        own = self._own_training_step()

        def batches(epoch: int) -> list:
            return list(enumerate(self.schedule(x.shape[0], gen, x.device)))

        def loss(epoch: int, batch) -> Tensor | None:
            index, rows = batch
            return self.training_step((x[rows], y[rows], None if w is None else w[rows]), index)

        with warnings.catch_warnings():
            if own:  # what the user's step logs needs a Trainer (--run.engine trainer); not a warning per step
                warnings.filterwarnings("ignore", message=r".*self\.log\(\)` but the `self\.trainer` reference.*")
            train_epochs(self.steps(self.parameters(), x.device), self.hparams.epochs, batches, loss)

    def _linear_layer(self) -> nn.Linear | None:
        """The network's one Linear layer when the learner is ``x Wᵀ + b`` trained in float32 (its steps then take
        closed-form gradients, :class:`vcl.engine.linear.LinearSteps`), else None."""
        return None if self._linear is None else self.net.get_submodule(self._linear)

    def _fit_trainer(self, x: Tensor, y: Tensor, w: Tensor | None) -> None:
        """``pl.Trainer.fit`` of this module on the fit's data as a party data module; the Trainer logs to
        TensorBoard in ``fit_options["log_dir"]`` when the organization gives one, with its callbacks."""

        hp, options = self.hparams, self.fit_options
        data = PartyDataModule(x, y, w, batch_size=hp.batch_size, seed=hp.seed)
        logger = False
        if options.get("log_dir") is not None:
            logger = TensorBoardLogger(options["log_dir"], name="", version=options.get("version"))
        with warnings.catch_warnings(), quiet_lightning():
            warnings.filterwarnings("ignore", message=".*LeafSpec.*")  # Lightning's use of an API torch deprecated
            warnings.filterwarnings("ignore", message=".*validation_step.*val_dataloader.*")  # a fit has no val rows
            trainer = self._trainer_for(hp, logger, build_callbacks(options.get("callbacks", ())))
            trainer.fit(self, train_dataloaders=data.train_dataloader())
        self.trainer = None  # the fitted module keeps no Trainer (nor its loggers and callbacks)
        self.to(x.device)  # Lightning's teardown leaves the module on the CPU: predict where the data lives

    @staticmethod
    def _trainer_for(hp, logger, callbacks) -> pl.Trainer:
        """A Trainer of this learner's epochs, hardware, precision and clipping (no checkpoints: the run keeps its
        own)."""
        return pl.Trainer(
            max_epochs=hp.epochs,
            accelerator=hp.accelerator,
            devices=hp.devices,
            precision=hp.precision,
            strategy=hp.strategy,
            gradient_clip_val=hp.grad_clip or None,
            logger=logger,
            callbacks=callbacks,
            enable_checkpointing=False,
            enable_progress_bar=progress.active(),  # Lightning's own bar under the round's
            enable_model_summary=False,
            log_every_n_steps=1,
        )


@contextlib.contextmanager
def quiet_lightning():
    """Lightning's info lines (hardware found, tips, "fit stopped") held back: a run fits many times, and its
    own progress says what happens. Warnings still show."""
    loggers = [logging.getLogger(name) for name in ("pytorch_lightning", "lightning_fabric", "lightning")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(max(lg.level, logging.WARNING))
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
