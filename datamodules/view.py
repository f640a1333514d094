"""One party's view as a LightningDataModule: its own features per split, and the targets it holds.

Every dataset's data module (:class:`vcl.datamodules.TabularDataModule` and the others) gives each party's view
as a :class:`PartyDataModule` (``dm.party(m)``). A view holds only that party's features; Alice's view (and a
DC party's, and MPDL's party B's) also holds the labels of its training rows, as targets a learner fits
(one-hot for classification, one column for regression); any other party's view holds targets only when it is
given them — the pseudo-residuals Alice sends (``targets=``). Batches are ``(x, target, weight)`` while
training (weights one unless given), ``(x, target)`` or ``(x,)`` otherwise, so a bare
``pl.Trainer(...).fit(learner, dm.party(m, targets=...))`` trains a party's learner on its own data — what
``run.engine: trainer`` does for every fit.
"""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from torch import Tensor
from torch.utils.data import DataLoader, TensorDataset

from vcl.engine.losses import one_hot


def label_targets(labels: Tensor, task: str, num_classes: int) -> Tensor:
    """Labels as a learner's targets: one-hot rows (classification) or one column (regression), float32."""
    if task == "classification":
        return one_hot(labels, num_classes)
    return labels.to(torch.float32).reshape(labels.shape[0], -1)


class PartyDataModule(pl.LightningDataModule):
    """``features`` ({split: N × ...}, or the training rows' tensor alone), ``targets`` (the same way, or None),
    ``weights`` (the training rows' sample weights, or None). Training batches of ``batch_size`` rows, shuffled
    by a generator seeded with ``seed`` when there is more than one batch."""

    def __init__(
        self,
        features: dict[str, Tensor] | Tensor,
        targets: dict[str, Tensor] | Tensor | None = None,
        weights: Tensor | None = None,
        batch_size: int = 1024,
        seed: int = 0,
        name: str = "",
    ):
        super().__init__()
        self.features = features if isinstance(features, dict) else {"train": features}
        self.targets = targets if isinstance(targets, dict) or targets is None else {"train": targets}
        self.weights, self.batch_size, self.seed, self.name = weights, batch_size, seed, name

    @property
    def splits(self) -> list[str]:
        return list(self.features)

    def dataset(self, split: str, weighted: bool = False) -> TensorDataset:
        x = self.features[split].cpu()
        y = None if self.targets is None else self.targets.get(split)
        if y is None:
            return TensorDataset(x)
        parts = [x, y.cpu()]
        if weighted:
            w = self.weights if self.weights is not None else torch.ones(x.shape[0])
            parts.append(w.cpu().to(torch.float32))
        return TensorDataset(*parts)

    def dataloader(self, split: str) -> DataLoader:
        return DataLoader(self.dataset(split), batch_size=self.batch_size)

    def train_dataloader(self) -> DataLoader:
        data = self.dataset("train", weighted=True)
        shuffle = len(data) > self.batch_size
        generator = torch.Generator().manual_seed(self.seed)
        return DataLoader(data, batch_size=self.batch_size, shuffle=shuffle, generator=generator)

    def val_dataloader(self) -> DataLoader | list:
        """The validation rows (else the test rows); none when the view holds only training rows."""
        split = next((s for s in ("val", "test") if s in self.features), None)
        return [] if split is None else self.dataloader(split)

    def test_dataloader(self) -> DataLoader | list:
        return self.dataloader("test") if "test" in self.features else []

    def predict_dataloader(self) -> DataLoader | list:
        if "test" not in self.features:
            return []
        return DataLoader(TensorDataset(self.features["test"].cpu()), batch_size=self.batch_size)
