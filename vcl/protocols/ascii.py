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

import math
from dataclasses import dataclass, field, fields

import numpy as np
import torch
from torch import Tensor

from vcl.config import RunConfig
from vcl.errors import VCLInputError
from vcl.federation import Federation
from vcl.loop import seed_for
from vcl.messages import Ack, Labels, Message, PredictionRequest, as_classes, as_float
from vcl.models import ClassifierSettings, build_classifier, check_classifier_name, check_weighted
from vcl.organization import Organization
from vcl.protocols.base import Protocol
from vcl.wiring import build_parties, make_task, organizations, organizations_datamodule


# --- the messages of this protocol step (each declares its tensors once; see vcl.messages) ---
@dataclass(frozen=True)
class IgnoranceScores(Message):
    """ASCII, agent → next agent in the chain: the ignorance scores ``w`` (length N, sum one; eqs 10, 12) and
    the model weights α of the agents before it in the round, the sender's included (with ``ascii.alpha=paper``
    only: ASCII-Simple and the exact α send none).

    ``round_start`` (the scores the round began from) rides along, with ``ascii_alpha=paper``, only to an
    agent that cannot know it, i.e. past the second hop of a chain of more than two agents: eq. 13's joint
    factor for the preceding agents of the round is ``scores / round_start``, which two agents get from the
    scores alone.
    """

    scores: Tensor = field(repr=False)
    alphas: Tensor = field(repr=False)
    round_start: Tensor | None = field(repr=False, default=None)

    tensors = {"scores": "scores", "alphas": "alphas", "round_start": "round_start"}


@dataclass(frozen=True)
class ClassVotes(Message):
    """ASCII, agent → Alice: predicted classes of its classifiers and their model weights α.

    After a round: ``alphas`` (1,) and ``classes`` {split: N} on the agent's rows of every split. In the
    prediction stage: ``alphas`` (T,) and ``classes`` {round: N} for each round model. Alice forms the
    SAMME-coded vote ``Σ α g`` (Algorithm 1, line 12) from them; no feature leaves the agent.
    """

    alphas: Tensor = field(repr=False)
    classes: dict[str, Tensor] = field(repr=False)

    tensors = {"alphas": "alphas", "*": "classes"}


@dataclass(frozen=True)
class Interchange(Message):
    """ASCII, Alice → agent: take your hop of round ``round`` (Algorithm 1, lines 3–10) on the ignorance scores
    the transport delivered to you, and pass yours on to ``next``. Public facts only, no tensor: the agent's
    place in the round's order (``position`` 0 starts the round), whether ``next`` is in this round (False on
    the last hop: the scores start the next round), whether ``next`` knows the round's start scores, whether α
    is the paper's joint one (``ascii.alpha=paper``, the α's travel on), and the seed of the agent's model."""

    position: int = 0
    next: str = ""
    next_in_round: bool = True
    next_knows_start: bool = True
    joint: bool = False
    seed: int = 0


@dataclass(frozen=True)
class Discarded(Message):
    """ASCII, agent → Alice: its model's α ≤ 0, so the model is discarded and passes nothing on (Algorithm 1,
    lines 5 and 8); ``alpha`` is the number itself. No tensor."""

    alpha: float = 0.0


VARIANTS = ("ascii", "simple", "random", "ensemble")
STOPS = ("alpha", "cv")
ALPHAS = ("exact", "paper")
MIN_ERROR = 1e-10  # a perfect weighted fit has α = ∞; the error is clipped here (α ≈ 23 + log(K − 1))


# --- the updates, as functions of what an agent holds ------------------------------------------------
def samme_code(classes: Tensor, num_classes: int) -> Tensor:
    """Eq. 1: 1 for the class, −1/(K−1) elsewhere (N × K)."""
    code = torch.full((classes.shape[0], num_classes), -1.0 / (num_classes - 1), device=classes.device)
    code[torch.arange(classes.shape[0], device=classes.device), classes.long()] = 1.0
    return code


def model_weight(w: Tensor, r: Tensor, num_classes: int, joint: Tensor | None = None) -> float:
    """α = log(Σ wφ r / Σ wφ (1 − r)) + log(K − 1): eq. 9 (and ``exact``) with φ = 1, eqs 11 and 13 as
    printed (``paper``) with φ = ``joint``."""
    v = w.to(torch.float64) if joint is None else w.to(torch.float64) * joint.to(torch.float64)
    r = r.to(torch.float64)
    good, bad = float((v * r).sum()), float((v * (1.0 - r)).sum())
    if good <= 0.0:
        return -math.inf
    error = max(bad / (good + bad), MIN_ERROR)
    return math.log((1.0 - error) / error) + math.log(num_classes - 1)


def pass_on(w: Tensor, r: Tensor, alpha: float) -> Tensor:
    """Eqs 10 and 12: ``w' = w · exp(α (1 − r))``, normalized to sum to one."""
    out = w.to(torch.float64) * torch.exp(alpha * (1.0 - r.to(torch.float64)))
    return out / out.sum()


def joint_factor(scores: Tensor, round_start: Tensor) -> Tensor:
    """φ ∝ Π_{j<m} exp(α_j (1 − r_j)) = scores / round_start (0 where both are 0); scaled to max 1."""
    scores, start = scores.to(torch.float64), round_start.to(torch.float64)
    phi = torch.where(start > 0, scores / start.clamp_min(1e-300), torch.zeros_like(scores))
    return phi / phi.max().clamp_min(1e-300)


def exponential_loss(votes: Tensor, labels: Tensor) -> float:
    """Mean of ``exp(−yᵀf / K)`` with f = Σ β g and β = (K−1)²/K · α (the loss ASCII minimizes)."""
    k = votes.shape[1]
    margin = (samme_code(labels, k) * votes).sum(1) * (k - 1) ** 2 / k**2
    return float(torch.exp(-margin).mean())


# --- an agent: what runs inside an organization ------------------------------------------------------
class IgnoranceAgent(Organization):
    """An organization in the ASCII chain: its features, classifiers and α's, its copy of the labels, and the
    ignorance scores the previous agent sent it (its inbox) until its hop uses them."""

    def __init__(self, view, learner: str, settings, classifier: ClassifierSettings, num_classes: int, device="cpu"):
        super().__init__(view, learner, "ce", settings, device)
        self.classifier = classifier
        self.num_classes = num_classes
        self.labels: Tensor | None = None
        self.alphas: list[float] = []
        self._start: tuple[int, Tensor] | None = None  # (round, scores) it sent that started that round
        self._inbox: IgnoranceScores | None = None  # the scores the transport delivered, for the next hop
        self._outbox: list[IgnoranceScores] = []  # the scores it sent, until the transport relays them

    def _new_learner(self, out_features: int, seed: int, loss: str | None = None):
        return build_classifier(
            self.learner_name, self.num_features, out_features, seed, self.settings, self.classifier
        )

    def handle(self, message: Message) -> Message | None:
        """Labels → :class:`Ack`; :class:`Interchange` → :class:`ClassVotes` (or :class:`Discarded`), its scores
        left for the transport to relay; :class:`IgnoranceScores` from another agent → kept, no reply;
        :class:`PredictionRequest` → :class:`ClassVotes`; :class:`ModelsRequest` → :class:`ModelsReport`."""
        if isinstance(message, Labels):
            self.labels = message.values.to(self._view.splits["train"].device).long()
            return Ack(self.name, message.sender, message.round)
        if isinstance(message, IgnoranceScores):
            if message.receiver != self.name:
                raise ValueError(f"{self.name} got scores for {message.receiver}.")
            self._inbox = message
            return None
        if isinstance(message, Interchange):
            return self.interchange(message)
        return super().handle(message)

    def outgoing(self) -> list[IgnoranceScores]:
        """The scores sent to the next agent since last asked (the transport relays them)."""
        out, self._outbox = self._outbox, []
        return out

    def _round_start(self, message: IgnoranceScores, hop: Interchange) -> Tensor:
        if message.round_start is not None:
            return message.round_start
        if self._start is not None and self._start[0] == hop.round:
            return self._start[1]
        if hop.round == 1:
            return torch.ones_like(message.scores)
        raise RuntimeError(
            f"{self.name} cannot know the start scores of round {hop.round}; the sender must attach them."
        )

    def interchange(self, hop: Interchange) -> ClassVotes | Discarded:
        """One hop (Algorithm 1, lines 3–10) on the scores in the inbox: WST, α, the scores passed on (to the
        outbox), and the votes for Alice. :class:`Discarded` when α ≤ 0: the model is dropped, nothing passed on.
        """
        message, self._inbox = self._inbox, None
        y, x = self.labels, self._view.splits["train"]
        w = torch.ones(y.shape[0], dtype=torch.float64, device=x.device) if message is None else message.scores
        w = w.to(x.device, torch.float64)
        start = joint = None
        if hop.joint:
            start = w if hop.position == 0 else self._round_start(message, hop).to(x.device)
            joint = None if hop.position == 0 else joint_factor(w, start)
        learner = self._new_learner(self.num_classes, hop.seed)
        learner.fit(x, y, w)
        predicted = learner.predict(x)
        r = (predicted == y).to(torch.float64)
        alpha = model_weight(w, r, self.num_classes, joint)
        if not alpha > 0:
            return Discarded(self.name, hop.sender, hop.round, alpha)
        self._models.append((hop.round, hop.seed, self.num_classes, learner))
        self.alphas.append(alpha)
        scores = as_float(pass_on(w, r, alpha))
        before = message.alphas.tolist() if (message is not None and hop.position > 0 and hop.joint) else []
        attach = hop.joint and hop.next_in_round and not hop.next_knows_start
        if not hop.next_in_round:
            self._start = (hop.round + 1, scores)
        self._outbox.append(
            IgnoranceScores(
                self.name,
                hop.next,
                hop.round,
                scores=scores,
                alphas=torch.tensor(before + [alpha] if hop.joint else [], dtype=torch.float32),
                round_start=as_float(start) if attach else None,
            )
        )
        classes = {
            s: as_classes(predicted if s == "train" else learner.predict(v), self.num_classes)
            for s, v in self._view.splits.items()
        }
        return ClassVotes(self.name, hop.sender, hop.round, torch.tensor([alpha], dtype=torch.float32), classes)

    def predict(self, message: PredictionRequest) -> ClassVotes:
        """Prediction stage: every round classifier's classes on the agent's own rows, with its α's."""
        x = self._view.splits[message.split]
        classes = {str(r): as_classes(lr.predict(x), self.num_classes) for r, _, _, lr in self._models}
        alphas = torch.tensor(self.alphas, dtype=torch.float32)
        return ClassVotes(self.name, message.sender, message.round, alphas, classes)

    def state_dict(self) -> dict:
        inbox = None if self._inbox is None else {f.name: getattr(self._inbox, f.name) for f in fields(self._inbox)}
        return {
            **super().state_dict(),
            "labels": self.labels,
            "alphas": list(self.alphas),
            "start": self._start,
            "inbox": inbox,
        }

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.labels, self.alphas, self._start = state["labels"], list(state["alphas"]), state["start"]
        self._inbox = None if state["inbox"] is None else IgnoranceScores(**state["inbox"])
        self._outbox = []


# --- the protocol: Alice's view of the chain ---------------------------------------------------------
@dataclass
class ASCIIOptions:
    variant: str = "ascii"  # ascii | simple | random | ensemble
    stop: str = "alpha"  # alpha (the paper's default) | cv (needs a validation split)
    patience: int = 1  # stop="cv": rounds without a better validation accuracy
    alpha: str = "exact"  # exact (minimizer of eq. 6 given the scores) | paper (eqs 11/13 as printed)


class AssistedClassification(Protocol):
    """ASCII and its variants over a federation of :class:`IgnoranceAgent` s (Alice first)."""

    name = "ascii"
    progress_header = "min alpha"
    starts_from_prior = False  # g_{0:0} = 0

    def progress_value(self, record: dict) -> str:
        """The smallest model weight α of the round (the paper stops at α ≤ 0)."""
        alphas = record.get("alphas") or []
        return f"{min(alphas):.4g}" if alphas else ""

    def __init__(self, task, federation, labels, options: ASCIIOptions | None = None, seed: int = 0, name=None):
        super().__init__(task, federation, labels, seed, name)
        self.options = options or ASCIIOptions()
        k, m = task.num_outputs, len(federation)
        self.F = {s: torch.zeros_like(f) for s, f in self.F.items()}
        self.ensemble = self.options.variant == "ensemble"
        self.agent_votes = (
            {s: torch.zeros(m, *f.shape, device=f.device) for s, f in self.F.items()} if self.ensemble else None
        )
        self.active = [True] * m
        self.previous_last: int | None = None
        self.best_val: float | None = None
        self.since_best = 0
        self.num_classes = k

    def stored_parameters(self) -> int:
        return sum(r.parameters for r in self.federation.models(self.round))

    def order(self, t: int) -> list[int]:
        """The chain of round t: 1 → … → M, or (``random``) a permutation every agent can draw from the seed."""
        m = len(self.federation)
        if self.options.variant == "random":
            return np.random.RandomState(seed_for(self.seed, t, 0xA5C11)).permutation(m).tolist()
        return list(range(m))

    def _send_labels(self) -> None:
        y = as_classes(self.labels["train"], self.num_classes)
        for name in self.federation.names:
            self.federation.transport.request(name, Labels(self.federation.alice, name, 1, y))

    def _add_votes(self, m: int, votes: ClassVotes) -> None:
        alpha = float(votes.alphas[0])
        for s, f in self.F.items():
            vote = alpha * samme_code(votes.classes[s].to(f.device), self.num_classes)
            if self.ensemble:
                self.agent_votes[s][m] += vote
            else:
                self.F[s] = f + vote

    def _majority(self, votes: Tensor) -> Tensor:
        """Ensemble-AdaBoost: one vote per agent with a model, for its own SAMME prediction."""
        ballots = torch.nn.functional.one_hot(votes.argmax(-1), self.num_classes).to(votes.dtype)
        has_model = (votes.abs().sum((1, 2)) > 0).to(votes.dtype)
        return torch.einsum("m,mnk->nk", has_model, ballots)

    def _hop(self, t: int, m: int, position: int, receiver: int, in_round: bool) -> ClassVotes | Discarded:
        """Ask agent ``m`` for its hop; its scores go to ``receiver`` through the transport, not through Alice."""
        names = self.federation.names
        request = Interchange(
            self.federation.alice,
            names[m],
            t,
            position=position,
            next=names[receiver],
            next_in_round=in_round,
            next_knows_start=t == 1 or receiver == self.previous_last,
            joint=self.options.alpha == "paper" and self.options.variant != "simple" and not self.ensemble,
            seed=seed_for(self.seed, t, m),
        )
        return self.federation.transport.request(names[m], request)

    def _chain_round(self, t: int, alphas: list[float]) -> None:
        order, following = self.order(t), self.order(t + 1)
        for position, m in enumerate(order):
            last = position == len(order) - 1
            reply = self._hop(t, m, position, following[0] if last else order[position + 1], not last)
            if isinstance(reply, Discarded):
                self.stopped = f"alpha <= 0 ({reply.sender}, round {t}: {reply.alpha:.3g})"
                return
            alphas[m] = float(reply.alphas[0])
            self._add_votes(m, reply)
        self.previous_last = order[-1]

    def _ensemble_round(self, t: int, alphas: list[float]) -> None:
        for m in range(len(self.federation)):
            if not self.active[m]:
                continue
            reply = self._hop(t, m, 0, m, False)  # its scores go to itself: nothing crosses
            if isinstance(reply, Discarded):
                self.active[m] = False
                continue
            alphas[m] = float(reply.alphas[0])
            self._add_votes(m, reply)
        self.F = {s: self._majority(v) for s, v in self.agent_votes.items()}
        if not any(self.active):
            self.stopped = f"alpha <= 0 for every agent (round {t})"

    def _check_validation(self) -> None:
        """Section III-C: stop once validation accuracy has not improved for ``patience`` rounds."""
        accuracy = self.task.metric(self.F["val"], self.labels["val"])
        if self.best_val is None or accuracy > self.best_val:
            self.best_val, self.since_best = accuracy, 0
        else:
            self.since_best += 1
        if self.since_best >= self.options.patience:
            self.stopped = f"validation accuracy did not improve for {self.since_best} round(s)"

    def run_round(self) -> dict:
        t = self.round + 1
        if t == 1:
            self._send_labels()
        alphas = [0.0] * len(self.federation)
        if self.ensemble:
            self._ensemble_round(t, alphas)
        else:
            self._chain_round(t, alphas)
        self.round = t
        if self.options.stop == "cv" and not self.stopped:
            self._check_validation()
        kinds = ("Labels", "IgnoranceScores")
        return self._record(
            alphas=alphas,
            order=self.order(t) if not self.ensemble else list(range(len(self.federation))),
            interchange_bytes=self.federation.channel.bytes_by_round(kinds).get(t, 0),
            stopped=self.stopped,
        )

    def train_loss(self) -> float:
        if self.ensemble:  # majority votes are not an additive model; report the agents' mean loss
            votes = self.agent_votes["train"]
            return float(np.mean([exponential_loss(v, self.labels["train"]) for v in votes]))
        return exponential_loss(self.F["train"], self.labels["train"])

    def predict(self, split: str) -> Tensor:
        """Algorithm 1, line 12, on rows of ``split`` every agent holds: Σ α g from each agent's round models.

        The votes are added in the order Alice received them during the run (round by round, along each
        round's chain), so the prediction equals the running F bit for bit, ties included.
        """
        alice = self.federation.alice
        requests = [(n, PredictionRequest(alice, n, self.round, split)) for n in self.federation.names]
        votes: list[dict[int, Tensor]] = []
        for reply in self.federation.transport.request_all(requests):
            pairs = zip(reply.alphas.tolist(), reply.classes.items(), strict=True)
            votes.append({int(r): a * samme_code(c.long(), self.num_classes) for a, (r, c) in pairs})
        rows = next(v for by_round in votes for v in by_round.values()).shape[0]
        device = self.F["train"].device
        if self.ensemble:
            stacked = torch.zeros(len(self.federation), rows, self.num_classes, device=device)
            for m, by_round in enumerate(votes):
                for t in sorted(by_round):
                    stacked[m] += by_round[t].to(device)
            return self._majority(stacked)
        total = torch.zeros(rows, self.num_classes, device=device)
        for t in range(1, self.round + 1):
            for m in self.order(t):
                if t in votes[m]:
                    total = total + votes[m][t].to(device)
        return total

    def state_dict(self) -> dict:
        return {
            **super().state_dict(),
            "agent_votes": self.agent_votes,
            "active": list(self.active),
            "previous_last": self.previous_last,
            "best_val": self.best_val,
            "since_best": self.since_best,
        }

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.agent_votes, self.active = state["agent_votes"], state["active"]
        self.previous_last, self.best_val, self.since_best = (
            state["previous_last"],
            state["best_val"],
            state["since_best"],
        )


# --- the ASCII family: how its runs are built (vcl.registry) ----------------------------------------------
PARTY_LOADS_ALL_DATA = False
datamodule = organizations_datamodule
VARIANTS = {"ascii_simple": "simple", "ascii_random": "random", "ensemble_adaboost": "ensemble"}


def parties(config: RunConfig, method: str, data, only: int | None = None, plan=None) -> list:
    """The agents (Single: Alice alone; Oracle: one agent holding every feature)."""
    trees = ClassifierSettings(
        max_depth=config.learner.max_depth or None, n_trees=config.learner.n_trees, resample=config.ascii.resample
    )

    def agent(plan, m, device):
        return IgnoranceAgent(plan.views[m], plan.learners[m], plan.settings, trees, max(data.num_classes, 1), device)

    return build_parties(config, method, data, agent, only, plan)


def build(config: RunConfig, data, method: str) -> AssistedClassification:
    check_task(config, method, make_task(config, data))
    task, _, labels, transport = organizations(config, method, data, parties, concurrent=False)
    a = config.ascii
    options = ASCIIOptions(variant=VARIANTS.get(method, "ascii"), stop=a.stop, patience=a.patience, alpha=a.alpha)
    return AssistedClassification(task, Federation(transport=transport), labels, options, config.run.seed, method)


def check_task(config: RunConfig, method: str, task) -> None:
    if task.kind != "classification":
        raise VCLInputError(
            f"method={method} is for classification; data.dataset={config.data.dataset!r} is a regression task."
        )
    if task.num_outputs < 2:
        raise VCLInputError(f"method={method} needs at least 2 classes in data.dataset={config.data.dataset!r}.")


def check(config: RunConfig) -> None:
    """Every agent's classifier exists and, with ``ascii.resample`` off, takes sample weights."""
    for name in config.learner.model:
        check_weighted(check_classifier_name(name), config.ascii.resample)
