"""Residual-fitting LightningModules: Linear and MLP regressors with the GAL paper's defaults.

Every learner is used only through ``fit(features, targets, sample_weight=None)`` and
``predict(features)``. ``fit`` has two engines over the same ``configure_optimizers`` and loss:

- ``fast`` (default): data stays on its device as whole tensors and the loop runs there — what
  tabular data this small needs (the authors' per-sample DataLoader spends half its time in Python);
- ``trainer``: a ``pytorch_lightning.Trainer`` with a DataLoader, for data or hardware that needs
  Lightning's machinery (accelerators, devices, precision, strategies).

With full batches both engines take the same optimizer steps (a test holds them equal).
"""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from torch import Tensor, nn

from vcl.losses import check_local_loss, local_loss


def build_mlp(in_features: int, out_features: int, hidden: tuple[int, ...] = ()) -> nn.Sequential:
    """``Linear`` when ``hidden`` is empty, otherwise Linear-ReLU blocks then a Linear head."""
    layers: list[nn.Module] = []
    width = in_features
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, out_features))
    return nn.Sequential(*layers)


def build_optimizer(params, lr: float, momentum: float, weight_decay: float, milestones, gamma: float):
    """SGD with step decay (GAL Table 9: lr 0.1, momentum 0.9, weight decay 5e-4, ×0.1 at epoch 50)."""
    opt = torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=list(milestones), gamma=gamma)
    return opt, sched


class ResidualRegressor(pl.LightningModule):
    """A Linear (``hidden=()``) or MLP regressor of Alice's pseudo-residual under a local loss."""

    def __init__(
        self,
        in_features: int,
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
    ):
        super().__init__()
        check_local_loss(loss, "loss")
        if engine not in ("fast", "trainer"):
            raise ValueError(f"engine={engine!r}; use 'fast' or 'trainer'.")
        self.save_hyperparameters()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.net = build_mlp(in_features, out_features, tuple(hidden))

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
        opt, sched = build_optimizer(self.parameters(), hp.lr, hp.momentum, hp.weight_decay, hp.milestones, hp.gamma)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "epoch"}}

    # --- the learner interface ----------------------------------------------------------------
    def fit(self, features: Tensor, targets: Tensor, sample_weight: Tensor | None = None):
        self.to(features.device)
        if self.hparams.engine == "trainer":
            self._fit_trainer(features, targets, sample_weight)
        else:
            self._fit_fast(features, targets, sample_weight)
        return self

    @torch.no_grad()
    def predict(self, features: Tensor) -> Tensor:
        self.eval()
        return self(features.to(self.device))

    def _fit_fast(self, x: Tensor, y: Tensor, w: Tensor | None) -> None:
        hp = self.hparams
        self.train()
        conf = self.configure_optimizers()
        opt, sched = conf["optimizer"], conf["lr_scheduler"]["scheduler"]
        n = x.shape[0]
        gen = torch.Generator(device="cpu").manual_seed(hp.seed)
        params = list(self.parameters())
        for _ in range(hp.epochs):
            order = None if n <= hp.batch_size else torch.randperm(n, generator=gen).to(x.device)
            for start in range(0, n, hp.batch_size):
                idx = None if order is None else order[start : start + hp.batch_size]
                batch = (x, y, w) if idx is None else (x[idx], y[idx], None if w is None else w[idx])
                opt.zero_grad(set_to_none=True)
                self.loss_on(batch).backward()
                if hp.grad_clip:
                    torch.nn.utils.clip_grad_norm_(params, hp.grad_clip)
                opt.step()
            sched.step()

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
            gradient_clip_val=hp.grad_clip or None,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
        )
        trainer.fit(self, loader)
