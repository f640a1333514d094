"""An ASCII agent: an organization that fits a weighted classifier on its own columns and passes on scores."""

from __future__ import annotations

from dataclasses import fields

import torch
from torch import Tensor

from vcl.messages import Ack, Labels, Message, as_classes, as_float
from vcl.methods.ascii.messages import ClassVotes, Discarded, IgnoranceScores, Interchange
from vcl.methods.ascii.updates import joint_factor, model_weight, pass_on
from vcl.methods.messages import PredictionRequest
from vcl.methods.organization import Organization
from vcl.models import ClassifierSettings, build_classifier


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
        outbox), and the votes for Alice. :class:`Discarded` when α ≤ 0: the model is dropped, nothing passed on."""
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
        if message.rows is not None:
            x = x[message.rows.to(device=x.device, dtype=torch.long)]
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
