"""GAL's protocol at Alice: the rounds of Algorithm 1, GAL's options (the config group plus what the run decides),
and Alice's federation with the privacy of her broadcast (what a receiver reads of it: :mod:`vcl.methods.gal.audit`)."""

from __future__ import annotations

import secrets
import time
from dataclasses import asdict, dataclass, replace

import torch
from torch import Tensor

from vcl.audit.budget import laplace_multiplier
from vcl.config import GALGroup, RunConfig
from vcl.engine.loop import seed_for
from vcl.engine.privacy import LabelPrivacy, make_mechanism
from vcl.errors import VCLInputError
from vcl.messages import as_float
from vcl.methods.assisted import AssistedProtocol, OrganizationFederation, organizations
from vcl.methods.columns import make_task
from vcl.methods.gal.assistance import assistance_weights, line_search
from vcl.methods.messages import PseudoResidual
from vcl.protocol import RoundRecord, weighted_sum


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


class GradientAssistedLearning(AssistedProtocol):
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
       :meth:`_weights` (:func:`vcl.methods.gal.assistance.assistance_weights`);
    4. she line-searches the assisted learning rate ``η^t = argmin_η L(y, F^{t−1} + η Σ_m w_m f_m^t)`` by L-BFGS →
       :meth:`_eta` (:func:`vcl.methods.gal.assistance.line_search`);
    5. ``F^t = F^{t−1} + η^t Σ_m w_m^t f_m^t`` on every split.

    Prediction stage: every organization sends each kept round model's outputs on new rows and Alice adds them
    up with the η and w she learned (:meth:`AssistedProtocol.predict`). :func:`vcl.coordinator.runner.train` drives
    the rounds (checkpoints, callbacks, --resume); the options (:class:`GALOptions`) give the paper's baselines."""

    name = "gal"

    def __init__(self, task, federation, labels, options: GALOptions | None = None, seed: int = 0, name=None):
        super().__init__(task, federation, labels, seed, name)
        self.options = options or GALOptions()
        # gal.privacy dp_residuals: Alice's state only from what she released (F⁰ public: 0, or a regression target's
        # public gal.label_bounds' midpoint; the weights and η fitted to the released residual), so that each round's
        # release depends on one person's label through their row alone
        self.released_state = self.options.privacy == "dp_residuals" and len(federation) > 1
        if self.released_state:
            bounds = self.options.label_bounds
            start = (bounds[0] + bounds[1]) / 2 if bounds and task.kind == "regression" else 0.0
            self.prior = torch.full_like(self.prior, start)
            self.F = {s: torch.full_like(f, start) for s, f in self.F.items()}

    @property
    def shares_models(self) -> bool:
        """Deep Model Sharing: each round retrains the extractor that the earlier rounds' models use."""
        return any(r.shared for r in self.federation.models(self.round))

    def stored_parameters(self) -> int:
        return sum(r.parameters for r in self.federation.models(self.round))

    def _weights(self, outputs: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        o, m = self.options, outputs.shape[0]
        if o.weights == "learned":
            return assistance_weights(outputs, residual, o.weight_loss, o.weight_steps, o.weight_lr, o.weight_decay)
        if o.weights == "bag":
            return torch.full((m,), 1.0 / m, device=outputs.device)
        w = torch.zeros(m, device=outputs.device)
        w[-1] = 1.0
        return w

    def _eta(self, direction: torch.Tensor, target: torch.Tensor) -> float:
        o = self.options
        if o.eta == "constant":
            eta = o.eta_value
        elif self.released_state:  # the step that best fits the released residual (target): it reads no label
            eta = float((target * direction).sum() / (direction * direction).sum().clamp_min(1e-12))
        else:
            eta = line_search(
                self.task, self.F["train"], direction, self.labels["train"], o.linesearch_steps, o.eta_value
            )
        return min(abs(eta), o.eta_cap) if o.eta_cap else eta  # 0: no cap (the paper)

    def run_round(self) -> RoundRecord:
        t = self.round + 1
        everyone = list(range(len(self.federation)))
        steps = [[m] for m in everyone] if self.options.sequential else [everyone]
        weights = [0.0] * len(everyone)
        coefficients = [0.0] * len(everyone)
        etas = []
        fit_seconds, waited, start = [0.0] * len(everyone), 0.0, time.perf_counter()
        for group in steps:
            residual = self.task.pseudo_residual(self.F["train"], self.labels["train"])
            released = self.federation.released(t, residual) if self.released_state else None
            asked = time.perf_counter()
            outputs = self.federation.gather_fits(t, residual, group, released=released)
            waited += time.perf_counter() - asked
            for m, seconds in self.federation.fit_seconds.items():
                fit_seconds[m] += seconds
            group = [m for m in group if m not in self.federation.absent]  # run.missing_parties: skip
            if not group:
                continue
            target = residual if released is None else released
            w = self._weights(outputs["train"], target)  # on the simplex of the organizations that answered
            direction = weighted_sum(w, outputs)
            eta = self._eta(direction["train"], target)
            for s in self.F:
                self.F[s] = self.F[s] + eta * direction[s]
            for m, wm in zip(group, w.tolist(), strict=True):
                weights[m] = wm
                coefficients[m] = eta * wm
            etas.append(eta)
        self.round = t
        eta = etas[-1] if len(etas) == 1 else etas
        missing = {"missing": self.federation.missing()} if self.federation.missing() else {}
        cost = {"fit_seconds": fit_seconds, "alice_seconds": time.perf_counter() - start - waited,
                "exchanges": len(steps)}  # fmt: skip
        return self.record(eta=eta, weights=weights, coefficients=coefficients, **cost, **missing)


NOISE = 0x9A11  # the purpose tag of Alice's noise draws: seed_for(noise_secret, round, NOISE)
BLIND = 0xB11D  # other draws from her secret: the attack's estimate without the noise's own draws
LABELS = 0x1ABE  # the draws of her labels' privacy (gal.privacy dp): seed_for(noise_secret, LABELS, split)


class GALFederation(OrganizationFederation):
    """Alice's federation: the organizations through ``transport``, with ``privacy`` (a :mod:`vcl.engine.privacy`
    mechanism) on what she sends them or ``label_privacy`` (:class:`vcl.engine.privacy.LabelPrivacy`) on her labels
    (:meth:`private_labels`); ``privacy_scope`` and ``privacy_draws`` as the ``gal`` options say. ``noise_secret``: her
    noise's seed, given or fresh from the operating system, kept in her checkpoint (docs/design.md, "Randomness")."""

    def __init__(
        self,
        transport,
        relays: bool = True,
        party_roots=None,
        privacy=None,
        privacy_scope: str = "others",
        privacy_draws: str = "per_round",
        noise_secret: int | None = None,
        label_privacy: LabelPrivacy | None = None,
    ):
        super().__init__(transport=transport, relays=relays, party_roots=party_roots)
        self.privacy, self.privacy_scope, self.privacy_draws = privacy, privacy_scope, privacy_draws
        self.noise_secret = int(noise_secret) if noise_secret else secrets.randbits(62)
        self.label_privacy, self.clean, self.private = label_privacy, {}, {}

    def private_labels(self, labels: dict[str, Tensor]) -> dict[str, Tensor]:
        """``labels`` with every split Alice trains or selects on (all but ``test``, the experimenter's) privatized
        once by ``label_privacy`` from her secret, if there is another organization to protect them from (Alone
        sends nothing). The protocol reads only these, so every message is post-processing of that one release; a
        resumed run redraws them in place from the secret its checkpoint restores (:meth:`load_state_dict`)."""
        if self.label_privacy is None or len(self.names) < 2:
            return labels
        self.clean = {s: y for s, y in labels.items() if s != "test"}
        self.private = {s: self._privatized(s) for s in self.clean}
        return {**labels, **self.private}

    def _privatized(self, split: str) -> Tensor:
        index = sorted(self.clean).index(split)
        draws = torch.Generator().manual_seed(seed_for(self.noise_secret, LABELS, index))
        return self.label_privacy(self.clean[split], draws)

    def gather_fits(
        self,
        round_: int,
        targets: Tensor,
        participants: list[int],
        labels: bool = False,
        loss: str | None = None,
        released: Tensor | None = None,
    ) -> dict[str, Tensor]:
        """Send ``targets`` to each participant, let each fit a fresh local model, gather its outputs: {split:
        (len(participants), N, K)}. ``labels=True`` sends the labels to be fitted with ``loss`` (centralized baselines).
        With a privacy mechanism the others get one perturbed broadcast (drawn per round from Alice's secret); her own
        fit uses the clean values (``privacy_scope="all"``: the broadcast), and she weighs the outputs against the clean
        residual, kept as ``own`` for the audit. ``released``: a broadcast :meth:`released` drew already
        (``dp_residuals``)."""
        clean = as_float(targets)
        public = clean
        if released is not None:
            public = released
        elif self.privacy is not None and not labels:
            public = self.released(round_, clean)
        values = {m: clean if m == 0 and self.privacy_scope == "others" else public for m in participants}
        return self.send_fits(round_, values, clean.device, labels, loss)

    def released(self, round_: int, clean: Tensor) -> Tensor:
        """What round ``round_``'s broadcast carries of the residual ``clean``: ``privacy`` drawn from Alice's secret
        (the same draw every round where ``privacy_draws`` is repeated), the clean values kept as her ``own``."""
        clean = as_float(clean)
        draw = round_ if self.privacy_draws == "per_round" else 1  # repeated: the first round's draw each round
        gen = torch.Generator(device=clean.device).manual_seed(seed_for(self.noise_secret, draw, NOISE))
        self.seen.add("own", PseudoResidual(self.alice, self.alice, round_, clean))
        return self.privacy(clean, gen)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "noise_secret": self.noise_secret}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.noise_secret = state.get("noise_secret", self.noise_secret)
        for split, held in self.private.items():  # the tensors the protocol holds, drawn from the restored secret
            held.copy_(self._privatized(split))


def planned_releases(config: RunConfig, organizations: int) -> int:
    """How many broadcasts of each person's residual a run plans: one a round (AL chained: one an organization)."""
    steps = organizations if config.method == "al" and config.gal.al_mode == "chained" else 1
    return config.run.rounds * steps


def broadcast_mechanism(config: RunConfig, organizations: int):
    """The mechanism on Alice's broadcast (:func:`vcl.engine.privacy.make_mechanism`); ``dp_residuals``: its noise
    calibrated so that the run's planned releases cost ``gal.privacy_epsilon`` at the accountant's δ."""
    g = config.gal
    multiplier = 0.0
    if g.privacy == "dp_residuals":
        multiplier = laplace_multiplier(g.privacy_epsilon, planned_releases(config, organizations))
    return make_mechanism(g.privacy, g.privacy_alpha, multiplier)


def gal_organizations(config: RunConfig, method: str, data, family):
    """What every GAL-family coordinator starts from (:func:`vcl.methods.assisted.organizations`), with Alice's
    federation (:class:`GALFederation`) and the privacy of her broadcast from the config (the noise from her own
    secret)."""
    g = config.gal
    labelled = None
    if g.privacy == "dp":
        classes = data.num_classes if data.task == "classification" else None
        labelled = LabelPrivacy(g.privacy_epsilon, classes, tuple(g.label_bounds) if g.label_bounds else None)
    # dp_residuals: Alice's own fit reads the release too (Alone, who sends nothing, fits the clean residual)
    scope = "all" if g.privacy == "dp_residuals" and method != "alone" else g.privacy_scope
    loss = make_task(config, data, family.column_options(config)).loss
    if g.privacy == "dp_residuals" and loss not in ("ce", "l1"):  # the methods it takes: GAL.check
        raise VCLInputError(
            f"gal.privacy=dp_residuals bounds each round's residual in [-1, 1]: it takes classification's "
            f"cross-entropy or regression's l1, not gal.task_loss {g.task_loss} ({loss}); use gal.privacy dp (the "
            "labels privatized once) otherwise."
        )
    privacy = {"privacy": broadcast_mechanism(config, len(data.views)), "privacy_scope": scope,
               "privacy_draws": g.privacy_draws, "noise_secret": g.privacy_secret or None,
               "label_privacy": labelled}  # fmt: skip
    task, plan, labels, fed = organizations(config, method, data, family, GALFederation, **privacy)
    return task, plan, fed.private_labels(labels), fed


def build(config: RunConfig, data, method: str, family) -> GradientAssistedLearning:
    """GAL, or its Alone / Joint (GAL over Alice only / one organization holding every feature) and AL runs, over
    the GAL family's organizations (``family``: :class:`vcl.methods.gal.GAL`, which makes them)."""
    task, plan, labels, fed = gal_organizations(config, method, data, family)
    options = GALOptions(**asdict(config.gal), weight_loss=plan.losses[0])
    if method == "al":
        authors = config.gal.al_mode == "authors"
        al = dict(weights="last" if authors else "learned", eta="constant", eta_cap=0.0, sequential=not authors)
        options = replace(options, **al)
    return GradientAssistedLearning(task, fed, labels, options, seed=config.run.seed, name=method)
