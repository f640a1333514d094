"""ASCII — assisted classification by ignorance interchange (Zhou, Xian, Li, Ding; Algorithms 1–2, eqs 1, 9–13).

Agent m fits with sample weights ``w^(m)``, scores ``r = 1[g(x) = y]`` and passes on ``w' ∝ w · exp(α (1 − r))``
(eqs 10, 12); Alice predicts ``argmax_k Σ_t Σ_m α_t^(m) g_t^(m)(x)`` (eq. 1). Variants, stop and the two α rules:
docs/ascii.md; a hop's messages: docs/design.md ("The organization boundary"). The coordinator never holds the
scores: they wait in the receiving agent's inbox, part of its checkpoint."""

from __future__ import annotations

from vcl.config import RunConfig
from vcl.errors import VCLInputError
from vcl.methods.ascii.messages import ClassVotes, Discarded, IgnoranceScores, Interchange
from vcl.methods.ascii.party import IgnoranceAgent
from vcl.methods.columns import OrganizationFamily
from vcl.models import ClassifierSettings, check_classifier_name, check_weighted


class ASCII(OrganizationFamily):
    """The ASCII family: ASCII, its variants (Simple, Random, Ensemble-AdaBoost) and its Single / Oracle references."""

    name = "ASCII"
    methods = ("ascii", "ascii_simple", "ascii_random", "ensemble_adaboost", "single", "oracle")
    reference = "single"
    joint_methods = ("oracle",)  # one agent holds every organization's columns
    messages = (IgnoranceScores, ClassVotes, Interchange, Discarded)
    auditor = "vcl.methods.ascii.audit"  # its attacks on what its receivers kept (docs/privacy.md)
    peer_messages = (IgnoranceScores,)  # each agent passes its scores to the next

    def party(self, config: RunConfig, method: str, plan, m: int, device) -> IgnoranceAgent:
        """An agent (Single: Alice alone; Oracle: one agent holding every feature)."""
        trees = ClassifierSettings(
            max_depth=config.learner.max_depth or None, n_trees=config.learner.n_trees, resample=config.ascii.resample
        )
        return IgnoranceAgent(plan.views[m], plan.learners[m], plan.settings, trees, plan.num_classes, device)

    def build(self, config: RunConfig, data, method: str):
        """Alice's side (:mod:`vcl.methods.ascii.coordinator`), imported here only: a party's own process loads the
        family without it."""
        from vcl.methods.ascii.coordinator import build

        return build(config, data, method, self)

    def check(self, config: RunConfig) -> None:
        """Every agent's classifier exists and, with ``ascii.resample`` off, takes sample weights; a stop by
        validation has a validation split."""
        if config.ascii.stop == "cv" and config.data.val_fraction <= 0:
            raise VCLInputError(
                "ascii.stop=cv needs a validation split; set data.val_fraction (the paper holds out 0.5)."
            )
        for name in config.learner.model:
            check_weighted(check_classifier_name(name), config.ascii.resample)
