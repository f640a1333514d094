"""Residual-fitting LightningModules: Linear, MLP, CNN and LSTM regressors with the GAL paper's defaults.

Every learner is used only through ``fit(features, targets, sample_weight=None)`` and
``predict(features)``. ``fit`` has two engines over the same ``configure_optimizers`` and loss:

- ``fast`` (default): data stays on its device as whole tensors and the loop runs there — what
  tabular data this small needs (the authors' per-sample DataLoader spends half its time in Python)
  and what keeps a GPU busy on images; mixed precision by ``precision``;
- ``trainer``: a ``pytorch_lightning.Trainer`` with a DataLoader, for data or hardware that needs
  Lightning's machinery (accelerators, devices, precision, strategies).

With full batches both engines take the same optimizer steps (a test holds them equal).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytorch_lightning as pl
import torch
from torch import Tensor, nn
from vcl.models.networks import build_network

from vcl import progress
from vcl.losses import check_local_loss, local_loss

PRECISIONS = ("32-true", "bf16-mixed", "16-mixed")


def build_optimizer(
    params, lr: float, momentum: float, weight_decay: float, milestones, gamma: float, optimizer: str = "sgd"
):
    """SGD (GAL Table 9: lr 0.1, momentum 0.9, weight decay 5e-4) or Adam (LSTM: lr 1e-3), with step decay."""
    if optimizer == "adam":
        opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    else:
        opt = torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=list(milestones), gamma=gamma)
    return opt, sched


def derived_seed(*parts: int) -> int:
    """A 31-bit seed from (learner seed, purpose, fit index, ...), so independent draws get independent streams."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0] & 0x7FFFFFFF)


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


DRAWS = 0xD809  # the purpose tag of a fit's draws from torch's global generator (dropout)


def step(loss: Tensor, opt, scaler, clip) -> None:
    """backward, optional gradient clipping (``clip`` is None or a callable), optimizer step; with a
    GradScaler (fp16) the loss is scaled and the gradients unscaled before clipping."""
    if scaler is None:
        loss.backward()
        if clip is not None:
            clip()
        opt.step()
        return
    scaler.scale(loss).backward()
    if clip is not None:
        scaler.unscale_(opt)
        clip()
    scaler.step(opt)
    scaler.update()


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
    ):
        super().__init__()
        check_local_loss(loss, "loss")
        if engine not in ("fast", "trainer"):
            raise ValueError(f"run.engine={engine!r}; use 'fast' or 'trainer'.")
        if precision not in PRECISIONS:
            raise ValueError(f"run.precision={precision!r}; use one of {', '.join(PRECISIONS)}.")
        in_shape = (in_features,) if isinstance(in_features, int) else tuple(in_features)
        self.save_hyperparameters()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.net = self.build_net(in_shape, out_features)

    def build_net(self, in_shape: tuple[int, ...], out_features: int) -> nn.Module:
        hp = self.hparams
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

    # --- Lightning idioms ---------------------------------------------------------------------
    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss_on(self, batch) -> Tensor:
        x, y, w = batch
        return local_loss(self(x), y, self.hparams.loss, w)

    def training_step(self, batch, batch_idx):
        loss = self.loss_on(batch)
        self.log("train_loss", loss, prog_bar=False, on_epoch=True, on_step=False)
        return loss

    def configure_optimizers(self):
        hp = self.hparams
        opt, sched = build_optimizer(
            self.parameters(), hp.lr, hp.momentum, hp.weight_decay, hp.milestones, hp.gamma, hp.optimizer
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "epoch"}}

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
        self.eval()
        x = features.to(self.device)
        with self._autocast(x.device):
            return torch.cat([self(x[i : i + chunk]).float() for i in range(0, x.shape[0], chunk)])

    def _autocast(self, device: torch.device):
        """Mixed precision for the fast engine: bf16 (``bf16-mixed``) or fp16 (``16-mixed``) autocast."""
        precision = self.hparams.precision
        if precision == "32-true":
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=torch.float16 if precision == "16-mixed" else torch.bfloat16)

    def _fit_fast(self, x: Tensor, y: Tensor, w: Tensor | None) -> None:
        """Minibatch SGD with the data resident on its device: no DataLoader, no host round trips per step."""
        hp = self.hparams
        self.train()
        conf = self.configure_optimizers()
        opt, sched = conf["optimizer"], conf["lr_scheduler"]["scheduler"]
        scaler = torch.amp.GradScaler(x.device.type) if hp.precision == "16-mixed" else None
        n = x.shape[0]
        gen = torch.Generator(device="cpu").manual_seed(hp.seed)
        params = list(self.parameters())
        for _ in range(hp.epochs):
            order = None if n <= hp.batch_size else torch.randperm(n, generator=gen).to(x.device)
            for start in range(0, n, hp.batch_size):
                if n - start < 2 and hp.arch == "cnn":
                    break  # BatchNorm cannot train on a single row
                idx = None if order is None else order[start : start + hp.batch_size]
                batch = (x, y, w) if idx is None else (x[idx], y[idx], None if w is None else w[idx])
                opt.zero_grad(set_to_none=True)
                with self._autocast(x.device):
                    loss = self.loss_on(batch)
                step(
                    loss,
                    opt,
                    scaler,
                    (lambda: torch.nn.utils.clip_grad_norm_(params, hp.grad_clip)) if hp.grad_clip else None,
                )
            sched.step()
            progress.advance()

    def _fit_trainer(self, x: Tensor, y: Tensor, w: Tensor | None) -> None:
        hp = self.hparams
        if w is None:
            w = torch.ones(x.shape[0], device=x.device)
        data = torch.utils.data.TensorDataset(x.cpu(), y.cpu(), w.cpu())
        shuffle = x.shape[0] > hp.batch_size
        gen = torch.Generator().manual_seed(hp.seed)
        loader = torch.utils.data.DataLoader(data, batch_size=hp.batch_size, shuffle=shuffle, generator=gen)
        trainer = pl.Trainer(
            max_epochs=hp.epochs,
            accelerator=hp.accelerator,
            devices=hp.devices,
            precision=hp.precision,
            strategy=hp.strategy,
            gradient_clip_val=hp.grad_clip or None,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=progress.active(),  # Lightning's own bar under the round's
            enable_model_summary=False,
        )
        trainer.fit(self, loader)
