"""Deep Model Sharing (GAL Section 4.2): one feature extractor per organization, one head per round.

At round t the organization adds a head and trains the shared extractor with heads 1..t jointly on the
residuals of rounds 1..t it has received, ``f_m^{1:t} = argmin E ℓ_m(r^{1:t}, f_{m,o}^{1:t}(f_{m,e}(x)))``.
Round s's model is ``head_s ∘ extractor``: memory holds one extractor and T small heads instead of T
whole networks. The residuals are messages the organization already received; they stay with it.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from vcl.models.residual import ResidualRegressor

from vcl.engine.loop import seeded_draws, seeded_init


class SharedExtractorRegressor(ResidualRegressor):
    """A :class:`ResidualRegressor` whose ``fit`` adds a round: a new head, trained with the older ones."""

    def build_net(self, in_shape: tuple[int, ...], out_features: int) -> nn.Module:
        net = super().build_net(in_shape, out_features)
        self.width = net[1].in_features
        self.heads = nn.ModuleList()
        self.residuals: list[Tensor] = []
        return net[0]  # self.net is the extractor; the heads come one per round

    @property
    def extractor(self) -> nn.Module:
        return self.net

    @property
    def rounds(self) -> int:
        return len(self.heads)

    def forward(self, x: Tensor) -> Tensor:
        """Every head's output side by side (N × t·K), the joint fit's prediction of r^{1:t}."""
        z = self.extractor(x)
        return torch.cat([h(z) for h in self.heads], dim=1)

    def _new_head(self) -> None:
        k = self.hparams.out_features
        with seeded_init(self.hparams.seed + 7919 * (self.rounds + 1)):
            head = nn.Linear(self.width, k)
        self.heads.append(head.to(self.device))

    @property
    def fit_index(self) -> int:
        """Round index of the next fit (0-based): the number of heads, restored with a checkpoint."""
        return self.rounds

    def fit(self, features: Tensor, targets: Tensor, sample_weight: Tensor | None = None):
        self.to(features.device)
        with seeded_draws(self.draw_seed(), features.device):
            self.residuals.append(targets.detach())
            self._new_head()
            self._fit_fast(features, torch.cat(self.residuals, dim=1), sample_weight)
        return self

    @torch.no_grad()
    def predict_round(self, features: Tensor, index: int, chunk: int = 4096) -> Tensor:
        """Round ``index``'s model (0-based), ``head_index ∘ extractor``."""
        self.eval()
        x = features.to(self.device)
        with self._autocast(x.device):
            return torch.cat(
                [self.heads[index](self.extractor(x[i : i + chunk])).float() for i in range(0, x.shape[0], chunk)]
            )

    def predict(self, features: Tensor, chunk: int = 4096) -> Tensor:
        return self.predict_round(features, self.rounds - 1, chunk)

    @torch.no_grad()
    def predict_rounds(self, features: Tensor, chunk: int = 4096) -> list[Tensor]:
        """Every round's model on ``features`` (equal to :meth:`predict_round` for each), the extractor run once."""
        self.eval()
        x = features.to(self.device)
        outs: list[list[Tensor]] = [[] for _ in self.heads]
        with self._autocast(x.device):
            for i in range(0, x.shape[0], chunk):
                z = self.extractor(x[i : i + chunk])
                for out, head in zip(outs, self.heads, strict=True):
                    out.append(head(z).float())
        return [torch.cat(o) for o in outs]

    def round_model(self, index: int) -> RoundHead:
        return RoundHead(self, index)

    # --- resumable state (heads and received residuals included) --------------------------------
    def shared_state(self) -> dict:
        return {
            "net": {k: v.cpu() for k, v in self.state_dict().items()},
            "residuals": [r.cpu() for r in self.residuals],
        }

    def load_shared_state(self, state: dict) -> None:
        while self.rounds < len(state["residuals"]):
            self._new_head()
        self.load_state_dict(state["net"])
        device = self.device
        self.residuals = [r.to(device) for r in state["residuals"]]

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


class RoundHead:
    """Round s's model of a shared-extractor learner, as the organization keeps it for the prediction stage."""

    def __init__(self, learner: SharedExtractorRegressor, index: int):
        self.learner = learner
        self.index = index

    def predict(self, features: Tensor) -> Tensor:
        return self.learner.predict_round(features, self.index)
