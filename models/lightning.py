"""The learner as a LightningModule, for ``run.engine: trainer`` (imported only by a run that uses it)."""

from __future__ import annotations

import pytorch_lightning as pl
import torch


class LightningFit(pl.LightningModule):
    """Wraps a :class:`~vcl.models.residual.ResidualRegressor`: the Trainer steps the learner's own parameters
    with the learner's loss, optimizer and schedule (the fast engine's, :meth:`ResidualRegressor.steps`)."""

    def __init__(self, learner):
        super().__init__()
        self.learner = learner

    def training_step(self, batch, batch_idx):
        loss = self.learner.loss_on(batch)
        self.log("train_loss", loss, prog_bar=False, on_epoch=True, on_step=False)
        return loss

    def configure_optimizers(self):
        steps = self.learner.steps(self.learner.parameters(), self.device, library=torch.optim)
        return {"optimizer": steps.optimizer, "lr_scheduler": {"scheduler": steps.scheduler, "interval": "epoch"}}
