"""A user's own LightningModule, Lightning callback and data module, importable by name
(``tests.lightning_user.Net``) in this process and in Ray's party processes (they start in the same working
directory). Not a test module."""

import pytorch_lightning as pl
import torch
from torch import nn
from vcl.datamodules import VerticalData, VerticalDataModule
from vcl.datamodules.tabular import FeatureView


class Net(pl.LightningModule):
    """Two layers and Adam of its own: the suite builds it with ``in_features`` and ``out_features``."""

    def __init__(self, in_features: int, out_features: int, hidden: int = 16, lr: float = 0.01):
        super().__init__()
        self.save_hyperparameters()
        self.body = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, out_features))

    def forward(self, x):
        return self.body(x)

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)}


class HuberNet(Net):
    """Its own ``training_step``: a weighted Huber loss, which it logs; counts its calls in this process."""

    calls = 0

    def training_step(self, batch, batch_idx):
        x, y, weight = batch
        type(self).calls += 1
        loss = (nn.functional.huber_loss(self(x), y, reduction="none").mean(1) * weight).mean()
        self.log("huber", loss, on_epoch=True, on_step=False, batch_size=x.shape[0])
        return {"loss": loss}


class ManualNet(Net):
    """Steps its own optimizers (manual optimization), which vcl refuses."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__(in_features, out_features)
        self.automatic_optimization = False


class PlainNet(pl.LightningModule):
    """No ``configure_optimizers``: the suite's optimizer options apply."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.layer = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.layer(x)


class CountEpochs(pl.Callback):
    """Counts the training epochs every Trainer it is given ends, in this process."""

    ended = 0

    def __init__(self, step: int = 1):
        self.step = step

    def on_train_epoch_end(self, trainer, pl_module):
        type(self).ended += self.step


class SignalWithBob(VerticalDataModule):
    """A user's own data module: Alice holds two noise columns and the labels, Bob two columns that decide them."""

    def __init__(self, rows: int = 300, seed: int = 0):
        super().__init__()
        self.rows, self.seed = rows, seed

    def setup(self, stage=None):
        if self.data is not None:
            return
        g = torch.Generator().manual_seed(self.seed)
        signal, noise = torch.randn(self.rows, 2, generator=g), torch.randn(self.rows, 2, generator=g)
        labels = (signal.sum(1) > 0).long()
        cut = int(0.8 * self.rows)
        parts = {"train": slice(0, cut), "test": slice(cut, None)}
        views = [
            FeatureView("alice", ["a1", "a2"], {s: noise[r] for s, r in parts.items()}),
            FeatureView("bob", ["b1", "b2"], {s: signal[r] for s, r in parts.items()}),
        ]
        self.data = VerticalData(views, {s: labels[r] for s, r in parts.items()}, "classification", 2)


class Misaligned(SignalWithBob):
    """Bob's view one test row short: not the labels' rows."""

    def setup(self, stage=None):
        super().setup(stage)
        self.data.views[1].splits["test"] = self.data.views[1].splits["test"][:-1]
