"""GAL — Gradient Assisted Learning (Diao, Ding, Tarokh; GAL paper, Algorithm 1).

Each round Alice broadcasts the pseudo-residual ``r^t = −∂L₁/∂F^{t−1}``; every organization fits it
with its own model and local loss and returns fitted values; Alice learns assistance weights on the
simplex, line-searches the assisted learning rate η, and updates ``F^t = F^{t−1} + η Σ_m w_m f_m``.

The same machinery, configured differently, gives the paper's boosting-style baselines:

- ``alone`` / ``joint``: this protocol over a federation of only Alice / one organization holding
  every feature (:func:`build` makes those federations);
- ``al`` (Assisted Learning): ``sequential=True`` — organizations fit one after another, each on the
  residual left by the previous one, with a constant rate. ``weights="last"`` with
  ``sequential=False`` is the authors' code: all fit the round's residual, only the last is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from vcl.assistance import assistance_weights, line_search
from vcl.config import RunConfig
from vcl.errors import VCLInputError
from vcl.models import DEEP, check_learner_loss, check_learner_name
from vcl.models.user import build_callbacks
from vcl.organization import Organization
from vcl.protocols.base import Protocol, weighted_sum
from vcl.wiring import build_parties, federation, organizations, organizations_datamodule, per_organization

WEIGHTS = ("learned", "bag", "last")
ETA = ("linesearch", "constant")


@dataclass
class GALOptions:
    weights: str = "learned"  # learned (simplex, Adam) | bag (plain average) | last (authors' AL)
    eta: str = "linesearch"  # linesearch (L-BFGS) | constant
    eta_value: float = 1.0  # the constant rate, or the line search's starting point
    eta_cap: float | None = None  # the authors' η = min(|η|, cap); None follows the paper
    sequential: bool = False  # AL: one organization at a time within a round
    weight_steps: int = 100
    weight_lr: float = 0.1
    weight_decay: float = 5e-4
    linesearch_steps: int = 10
    weight_loss: str = "l2"  # Alice's own local loss ℓ₁, for fitting the weights


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
        return min(abs(eta), o.eta_cap) if o.eta_cap is not None else eta

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


# --- the GAL family: how its runs are built (vcl.registry) ------------------------------------------------
PARTY_LOADS_ALL_DATA = False
datamodule = organizations_datamodule


def parties(config: RunConfig, method: str, data, only: int | None = None, plan=None) -> list:
    """The organizations of a GAL-family run (Interm fusion builds its own parts: :mod:`vcl.protocols.interm`)."""

    def organization(plan, m, device):
        noise = config.gal.noise_sigma if m in plan.noisy else 0.0
        return Organization(
            plan.views[m], plan.learners[m], plan.losses[m], plan.settings, device, noise, config.run.seed, m
        )

    return build_parties(config, method, data, organization, only, plan)


def build(config: RunConfig, data, method: str) -> GradientAssistedLearning:
    """GAL, or its Alone / Joint (GAL over Alice only / one organization holding every feature) and AL runs."""
    task, plan, labels, transport = organizations(config, method, data, parties, config.run.concurrent)
    options = GALOptions(
        weights=config.gal.weights,
        eta=config.gal.eta,
        eta_value=config.gal.eta_value,
        eta_cap=config.gal.eta_cap or None,
        weight_loss=plan.losses[0],
    )
    if method == "al":
        authors = config.gal.al_mode == "authors"
        options = GALOptions(
            weights="last" if authors else "learned",
            eta="constant",
            eta_value=config.gal.eta_value,
            sequential=not authors,
            weight_loss=plan.losses[0],
        )
    fed = federation(config, transport)
    return GradientAssistedLearning(task, fed, labels, options, seed=config.run.seed, name=method)


def check(config: RunConfig) -> None:
    """Every organization's learner exists and can fit its local loss (GB: l1 or l2); Deep Model Sharing and
    Interm fusion have the deep learners they need."""
    for name in config.learner.model:
        if name != "gb-svm":
            check_learner_name(name)
    build_callbacks(config.learner.callbacks)  # a wrong class path is one sentence before any work
    count = len(config.data.csv_files) if config.data.dataset == "csv" else config.data.organizations
    try:
        learners = per_organization(config.learner.model, count, "learner.model")
        losses = per_organization(config.gal.local_loss, count, "gal.local_loss")
    except VCLInputError:
        learners = losses = []  # a list of the wrong length is reported, by name, when the organizations are built
    for m, (name, loss) in enumerate(zip(learners, losses, strict=False)):
        if loss != "auto":  # auto is l1 or l2
            check_learner_loss(name, loss, f" (organization {m})")
    if config.gal.dms and any(name not in DEEP for name in config.learner.model):
        raise VCLInputError(
            f"gal.dms=true shares a deep feature extractor; use learner.model cnn, lstm, mlp or linear, "
            f"not {config.learner.model}."
        )
    if "interm" in (config.method, *(config.compare or ())) and any(
        n not in ("mlp", "cnn", "lstm") or n == "mlp" and not config.learner.hidden for n in config.learner.model
    ):
        raise VCLInputError(
            f"interm averages the organizations' hidden layers, which learner.model={config.learner.model} has not; "
            "use mlp with learner.hidden widths (cnn for images, lstm for sequences)."
        )
