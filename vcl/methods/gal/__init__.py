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

from vcl.config import RunConfig
from vcl.config.resolve import per_organization
from vcl.engine.split_network import ActivationGradient, Activations
from vcl.errors import VCLInputError
from vcl.methods.columns import OrganizationFamily
from vcl.methods.gal.party import column_options, parties
from vcl.methods.organization import Organization
from vcl.models import DEEP, check_learner_loss, check_learner_name
from vcl.models.user import build_callbacks


class GAL(OrganizationFamily):
    """The GAL family: GAL, Alone, Joint, AL (this module), Late fusion (:mod:`.late`) and Interm fusion
    (:mod:`.interm`, whose organizations hold parts of one network)."""

    name = "GAL"
    methods = ("gal", "alone", "joint", "al", "late", "interm")
    reference = "alone"
    skips_missing = ("gal", "al", "alone")  # their rounds go on without an organization that is down
    joint_methods = ("joint",)  # one party holds every organization's columns
    messages = (Activations, ActivationGradient)  # Interm's; the organizations' are OrganizationFamily's
    auditor = "vcl.methods.gal.audit"  # its attacks on what its receivers kept (docs/privacy.md)

    def parties(self, config: RunConfig, method: str, data, only: int | None = None, plan=None) -> list:
        """The organizations, each with its own learner and local loss (Interm: its part of the network)."""
        if method == "interm":
            return parties(config, method, data, only, plan)
        return super().parties(config, method, data, only, plan)

    def column_options(self, config: RunConfig):
        return column_options(config)

    def round_callbacks(self, config: RunConfig) -> list:
        """Early stop when |η| falls below ``gal.early_stop_eta`` (GAL Section 4.5), if set (Alice's side only)."""
        from vcl.callbacks.early_stop import EarlyStopOnEta

        return [EarlyStopOnEta(config.gal.early_stop_eta)] if config.gal.early_stop_eta > 0 else []

    def party(self, config: RunConfig, method: str, plan, m: int, device) -> Organization:
        noise = config.gal.noise_sigma if m in plan.noisy else 0.0
        return Organization(
            plan.views[m], plan.learners[m], plan.losses[m], plan.settings, device, noise, config.run.seed, m
        )

    def build(self, config: RunConfig, data, method: str):
        """GAL, or its Alone / Joint (GAL over Alice only / one organization holding every feature), AL, Late and
        Interm runs: Alice's side, imported here only (a party's own process loads the family without it)."""
        from vcl.methods.gal import coordinator, interm, late

        return {"late": late, "interm": interm}.get(method, coordinator).build(config, data, method, self)

    def check(self, config: RunConfig) -> None:
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
        g = config.gal
        if g.privacy == "dp" and g.privacy_alpha != 1.0:
            raise VCLInputError(
                f"gal.privacy_alpha={g.privacy_alpha} sets the noise of gal.privacy residual_laplace (the paper's, no "
                "DP guarantee); gal.privacy dp privatizes the labels and takes gal.privacy_epsilon instead."
            )
        if g.privacy == "dp_residuals" and ({config.method, *(config.compare or ())} & {"late", "interm"}
                                            or g.privacy_draws == "repeated"):  # fmt: skip
            raise VCLInputError(
                "gal.privacy=dp_residuals composes a fresh draw a round over GAL's, AL's or Alone's broadcasts; it "
                "takes neither late nor interm (in method or compare) nor gal.privacy_draws repeated."
            )
        if g.label_bounds and (len(g.label_bounds) != 2 or not g.label_bounds[0] < g.label_bounds[1]):
            raise VCLInputError(f"gal.label_bounds={g.label_bounds}; give two numbers [low, high] with low < high.")
        if config.gal.dms and any(name not in DEEP for name in config.learner.model):
            raise VCLInputError(
                f"gal.dms=true shares a deep feature extractor; use learner.model cnn, lstm, mlp or linear, "
                f"not {config.learner.model}."
            )
        if "interm" in (config.method, *(config.compare or ())) and any(
            n not in ("mlp", "cnn", "lstm") or n == "mlp" and not config.learner.hidden for n in config.learner.model
        ):
            raise VCLInputError(
                f"interm averages the organizations' hidden layers, which learner.model={config.learner.model} has "
                "not; use mlp with learner.hidden widths (cnn for images, lstm for sequences)."
            )
