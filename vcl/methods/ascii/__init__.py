"""ASCII — assisted classification by ignorance interchange (Zhou, Xian, Li, Ding; Algorithms 1–2, eqs 1, 9–13).

Agents sit in a chain 1 → 2 → … → M → 1, Alice first. Alice sends the labels once. In round t, agent
m fits its own classifier with sample weights ``w^(m)`` (WST, Algorithm 2), scores its reward
``r = 1[g(x) = y]`` on the training rows, computes its model weight α, and passes on
``w' ∝ w · exp(α (1 − r))`` (eqs 10, 12) with the α's of the agents before it in the round. Alice
predicts ``argmax_k Σ_t Σ_m α_t^(m) g_t^(m)(x)`` with SAMME-coded votes (eq. 1; Algorithm 1, line 12).

α (the common factor the paper drops is dropped here too) is, for the first agent of a round, eq. 9:
``log(r̄ / (1 − r̄)) + log(K − 1)``, ``r̄ = Σ w r / Σ w``. For the agents after it, ``alpha`` chooses:

- ``exact`` (default): eq. 9 on the scores the agent receives. The round's objective (eq. 6; Section
  IV for M agents) is ``Σ_i w_i^(first) exp(−yᵢᵀ(Σ_{j<m} β_j g_j + β g_m)/K)``, and the scores agent m
  receives are, up to a constant, ``w^(first) · exp(−yᵀ Σ_{j<m} β_j g_j / K)`` already (eqs 10, 12), so
  the objective is ``Σ_i w_i^(m) exp(−yᵢᵀ β g_m / K)`` and its minimizer is eq. 9 on ``w^(m)``: the α
  ASCII-Simple uses. Nothing but the scores is needed, so no α's travel; ASCII and ASCII-Simple then
  fit the same models (tested) and ``random`` differs from them in its order only.
- ``paper``: eqs 11 and 13 as printed: eq. 9 with ``w`` replaced by ``w · φ``, where ``φ_i`` is the
  exponential-loss factor of the round's preceding models on row i (Appendix B). Eq. 8 multiplies that
  factor onto scores that already contain it, so the preceding agents count twice; this is the exact
  minimizer of eq. 8 as printed (a test checks it by brute force), not of eq. 6. Up to a constant,
  ``φ = w^(m) / w^(first)``, the ratio of the scores received to those the round started from; two
  agents know both, longer chains send the round's start scores along (see :class:`IgnoranceScores`),
  and the α's of the round travel with the scores as in Algorithm 1. The paper's ``K/(K−1)²`` is Hastie
  et al.'s ``(K−1)²/K`` inverted, and the exponents of eq. 11 use the loss's own coefficient
  ``β = (K−1)²/K · α``.

Variants (Section V): ``simple`` (α from the agent's own loss only, eq. 9; no α's are sent),
``random`` (a new random order every round, drawn from the run seed so every agent knows it),
``ensemble`` (no interchange: every agent boosts on its own; Alice takes the majority vote of the
agents' SAMME predictions). One agent (Single: Alice alone; Oracle: one agent with every feature)
makes ASCII exactly SAMME. Stop: an agent's α ≤ 0 ends the run, that model discarded (Algorithm 1,
lines 5 and 8), or — ``stop="cv"`` — validation accuracy that no longer improves (Section III-C).

Behind the transport (:mod:`vcl.transport`), Alice's coordinator reaches the agents only by messages and
sees only what the paper gives her. Round 1 opens with :class:`Labels` to every agent (answered by an empty
:class:`Ack`). Each hop is an :class:`Interchange` request from Alice to the agent: the public facts of the
hop (round, position, next agent, whether the next agent is in this round and knows its start scores, the
α rule, the model's seed), no tensor. The agent fits on the :class:`IgnoranceScores` in its inbox (none in
round 1: w = 1) and replies with :class:`ClassVotes` (its α and its classes on its rows), or with
:class:`Discarded` (α ≤ 0, the number only). The scores it passes on go to its outbox; after the request the
transport relays them to the next agent (counted once in the ledger, agent → agent; to itself in
Ensemble-AdaBoost, so nothing crosses), whose ``handle`` keeps them for its hop. The coordinator never holds
the scores, not even as an opaque reference: between hops and rounds they wait in the receiving agent's
inbox, which is part of that agent's checkpoint (a dict of the message's fields, data only). Alice's own
checkpoint is round, votes, order facts and stop state. The prediction stage is a :class:`PredictionRequest`
answered with :class:`ClassVotes`. Ack, Interchange and Discarded carry no tensor, so the ledger's bytes
are those of the scores, the labels and the votes, as before the transport; the α's Alice records are the
float32 α's of the votes she receives.
"""

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
