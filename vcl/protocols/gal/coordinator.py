"""GAL's protocol at Alice: the rounds of Algorithm 1, and GAL's options (the config group plus what the run
decides)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from vcl.assistance import assistance_weights, line_search
from vcl.config import GALGroup, RunConfig, config_integers, party_copy
from vcl.protocols.base import Protocol, weighted_sum


@dataclass
class GALOptions(GALGroup):
    """The ``gal`` options (the config group's, spelled there once) and what the run decides: AL's one organization
    at a time, Alice's local loss for the weights, and the fit of the weights and of η."""

    sequential: bool = False  # AL: one organization at a time within a round
    weight_loss: str = "l2"  # Alice's own local loss ℓ₁, for fitting the weights
    weight_steps: int = 100
    weight_lr: float = 0.1
    weight_decay: float = 5e-4
    linesearch_steps: int = 10


class GradientAssistedLearning(Protocol):
    """The assistance loop: GAL's Algorithm 1, one round per :meth:`run_round`, on Alice's device.

    Learning stage, round t (the paper's lines → this code):

    1. Alice computes the pseudo-residual ``r^t = −∂L(y, F^{t−1})/∂F^{t−1}`` → ``self.task.pseudo_residual``
       on ``self.F["train"]`` (Alice's running prediction F, per split, on her device) and her labels;
    2. she broadcasts ``r^t``, and each organization m fits ``f_m^t = argmin ℓ_m(r^t, f(x_m))`` with its own
       LightningModule (or estimator) and local loss, on its own data, and returns ``f_m^t(x_m)`` →
       ``self.federation.gather_fits`` (messages through the run's transport; a party with Deep Model Sharing,
       ``gal.dms``, trains one shared extractor with a new head per round,
       :class:`vcl.models.SharedExtractorRegressor`);
    3. Alice learns the assistance weights ``w^t`` on the simplex, ``argmin ℓ₁(r^t, Σ_m w_m f_m^t)`` →
       :meth:`_weights` (:func:`vcl.assistance.assistance_weights`);
    4. she line-searches the assisted learning rate ``η^t = argmin_η L(y, F^{t−1} + η Σ_m w_m f_m^t)`` by L-BFGS →
       :meth:`_eta` (:func:`vcl.assistance.line_search`);
    5. ``F^t = F^{t−1} + η^t Σ_m w_m^t f_m^t`` on every split.

    Prediction stage: every organization sends each kept round model's outputs on new rows and Alice adds them
    up with the η and w she learned (:meth:`Protocol.predict`). :func:`vcl.runner.train` drives the rounds
    (checkpoints, callbacks, --resume); the options (:class:`GALOptions`) give the paper's baselines."""

    name = "gal"

    def __init__(self, task, federation, labels, options: GALOptions | None = None, seed: int = 0, name=None):
        super().__init__(task, federation, labels, seed, name)
        self.options = options or GALOptions()

    @property
    def shares_models(self) -> bool:
        """Deep Model Sharing: each round retrains the extractor that the earlier rounds' models use."""
        return any(r.shared for r in self.federation.models(self.round))

    def stored_parameters(self) -> int:
        return sum(r.parameters for r in self.federation.models(self.round))

    def kept_round_metrics(self) -> dict[int, dict[str, float]]:
        """Round t's metrics from the models the run keeps (rounds 1..t), through the prediction stage. With
        Deep Model Sharing that is the final extractor with heads 1..t, while Alice's running F used each
        round's extractor as it was then; without it the two agree (tested)."""
        return self.metrics_by_round()

    def _weights(self, outputs: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        o, m = self.options, outputs.shape[0]
        if o.weights == "learned":
            return assistance_weights(outputs, residual, o.weight_loss, o.weight_steps, o.weight_lr, o.weight_decay)
        if o.weights == "bag":
            return torch.full((m,), 1.0 / m, device=outputs.device)
        w = torch.zeros(m, device=outputs.device)
        w[-1] = 1.0
        return w

    def _eta(self, direction: torch.Tensor) -> float:
        o = self.options
        if o.eta == "constant":
            eta = o.eta_value
        else:
            eta = line_search(
                self.task, self.F["train"], direction, self.labels["train"], o.linesearch_steps, o.eta_value
            )
        return min(abs(eta), o.eta_cap) if o.eta_cap else eta  # 0: no cap (the paper)

    def run_round(self) -> dict:
        t = self.round + 1
        everyone = list(range(len(self.federation)))
        steps = [[m] for m in everyone] if self.options.sequential else [everyone]
        weights = [0.0] * len(everyone)
        coefficients = [0.0] * len(everyone)
        etas = []
        for group in steps:
            residual = self.task.pseudo_residual(self.F["train"], self.labels["train"])
            truth = self.labels["train"] if self.task.kind == "classification" else None
            outputs = self.federation.gather_fits(t, residual, group, self.seed, truth=truth)
            w = self._weights(outputs["train"], residual)
            direction = weighted_sum(w, outputs)
            eta = self._eta(direction["train"])
            for s in self.F:
                self.F[s] = self.F[s] + eta * direction[s]
            for m, wm in zip(group, w.tolist(), strict=True):
                weights[m] = wm
                coefficients[m] = eta * wm
            etas.append(eta)
        self.round = t
        leak = self.federation.leaks.get(t, {})  # what a receiver reads of the labels, recovers of the residual
        eta = etas[-1] if len(etas) == 1 else etas
        return self._record(eta=eta, weights=weights, coefficients=coefficients, **leak)


def federation(config: RunConfig, transport):
    """Alice's federation in a GAL-family run: the transport to the organizations and the privacy of her broadcast
    (the noise from her own secret; the attack scored with every number a receiver's copy of the config holds)."""
    from vcl.federation import Federation
    from vcl.privacy import make_mechanism

    return Federation(
        transport=transport,
        privacy=make_mechanism(config.gal.privacy, config.gal.privacy_alpha),
        privacy_scope=config.gal.privacy_scope,
        noise_secret=config.gal.privacy_secret or None,
        known_seeds=config_integers(party_copy(config.to_dict())),  # all a receiver's copy of the config holds
    )
