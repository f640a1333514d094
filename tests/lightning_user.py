"""A user's own LightningModule and Lightning callback, importable by name (``tests.lightning_user.Net``) in this
process and in Ray's party processes (they start in the same working directory). Not a test module."""

import pytorch_lightning as pl
import torch
from torch import nn


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
