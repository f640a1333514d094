"""Intermediate fusion (a centralized baseline of the GAL paper, 'Interm').

Each organization's feature extractor (its learner's network without the last layer) maps its own
features to a hidden representation; the representations are averaged and a shared last layer gives
the prediction. Everything is trained end to end on the labels, so it needs the labels and every
view in one place: it is the reference GAL is compared with, not a privacy-preserving method. One round.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from models import LearnerSettings, build_learner
from models.residual import DRAWS, derived_seed, seeded_draws
from vcl.losses import local_loss
from vcl.organization import FeatureView, seed_for
from vcl.protocols.base import Protocol


class IntermNet(nn.Module):
    def __init__(self, extractors: list[nn.Module], width: int, out_features: int):
        super().__init__()
        self.extractors = nn.ModuleList(extractors)
        self.head = nn.Linear(width, out_features)

    def forward(self, xs: list[Tensor]) -> Tensor:
        hidden = torch.stack([e(x) for e, x in zip(self.extractors, xs, strict=True)])
        return self.head(hidden.mean(0))


class IntermFusion(Protocol):
    name = "interm"
    max_rounds = 1
    starts_from_prior = False

    def __init__(
        self,
        task,
        federation,
        labels: dict[str, Tensor],
        views: list[FeatureView],
        learners: list[str],
        settings: LearnerSettings,
        seed: int = 0,
    ):
        super().__init__(task, federation, labels, seed)
        device = next(iter(labels.values())).device
        self.views = [v.to(device) for v in views]
        k = task.num_outputs
        nets = [
            build_learner(name, v.example_shape, k, "l2", seed_for(seed, 0, m), settings)
            for m, (v, name) in enumerate(zip(self.views, learners, strict=True))
        ]
        widths = {lr.net[1].in_features for lr in nets}
        if len(widths) != 1:
            raise ValueError(f"interm averages hidden representations; the learners' widths differ: {sorted(widths)}.")
        self.template = nets[0]  # its hyper-parameters give the optimizer, epochs and batch size
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.model = IntermNet([lr.net[0] for lr in nets], widths.pop(), k).to(device)

    def _forward(self, split: str, rows: Tensor) -> Tensor:
        return self.model([v.splits[split][rows] for v in self.views])

    def run_round(self) -> dict:
        hp = self.template.hparams
        task = self.task
        loss_name = "ce" if task.kind == "classification" else ("l1" if task.loss == "l1" else "l2")
        y = task.targets(self.labels["train"])
        conf = self.template.configure_optimizers()  # the same optimizer family, over the fused model
        opt = type(conf["optimizer"])(self.model.parameters(), **conf["optimizer"].defaults)
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, list(hp.milestones), hp.gamma)
        n = y.shape[0]
        gen = torch.Generator().manual_seed(self.seed)
        self.model.train()
        with seeded_draws(derived_seed(self.seed, DRAWS), y.device):  # dropout draws from the run seed
            for _ in range(hp.epochs):
                order = torch.randperm(n, generator=gen).to(y.device)
                for start in range(0, n, hp.batch_size):
                    idx = order[start : start + hp.batch_size]
                    if idx.numel() < 2:
                        break  # BatchNorm cannot train on a single row
                    opt.zero_grad(set_to_none=True)
                    local_loss(self._forward("train", idx), y[idx], loss_name).backward()
                    if hp.grad_clip:
                        nn.utils.clip_grad_norm_(self.model.parameters(), hp.grad_clip)
                    opt.step()
                sched.step()
        self.F = {s: self.predict(s) for s in self.labels}
        self.round = 1
        return self._record()

    @torch.no_grad()
    def predict(self, split: str, chunk: int = 4096) -> Tensor:
        self.model.eval()
        n = self.views[0].splits[split].shape[0]
        device = self.views[0].splits[split].device
        return torch.cat(
            [self._forward(split, torch.arange(i, min(i + chunk, n), device=device)) for i in range(0, n, chunk)]
        )

    def state_dict(self) -> dict:
        return {**super().state_dict(), "model": {k: v.cpu() for k, v in self.model.state_dict().items()}}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.model.load_state_dict(state["model"])
