"""Alice's view of the chain: ASCII's rounds (and its variants), reaching the agents only by messages."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import Tensor

from vcl.config import ASCIIGroup, RunConfig
from vcl.engine.loop import seed_for
from vcl.errors import VCLInputError
from vcl.messages import Labels, as_classes
from vcl.methods.ascii.messages import ClassVotes, Discarded, Interchange
from vcl.methods.ascii.updates import exponential_loss, samme_code
from vcl.methods.assisted import organizations
from vcl.methods.columns import make_task
from vcl.methods.messages import PredictionRequest
from vcl.protocol import Protocol, RoundRecord


# --- the protocol: Alice's view of the chain ---------------------------------------------------------
@dataclass
class ASCIIOptions(ASCIIGroup):
    """The ``ascii`` options (the config group's, spelled there once) and the method's variant."""

    variant: str = "ascii"  # ascii | simple | random | ensemble: from the method's name


class AssistedClassification(Protocol):
    """ASCII and its variants over a federation of :class:`IgnoranceAgent` s (Alice first)."""

    name = "ascii"
    progress_header = "min alpha"

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
            self.federation.request(name, Labels(self.federation.alice, name, 1, y))

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
        return self.federation.request(names[m], request)

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

    def run_round(self) -> RoundRecord:
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
        return self.record(
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

    def probabilities(self, F: Tensor) -> Tensor:
        """SAMME's class probabilities from the weighted votes (Zhu et al. 2009): p_k ∝ exp(F_k / (K − 1))."""
        return torch.softmax(F.double() / max(self.num_classes - 1, 1), dim=1)

    def predict(self, split: str, rows: Tensor | None = None) -> Tensor:
        """Algorithm 1, line 12, on rows of ``split`` every agent holds: Σ α g from each agent's round models, added
        in the order Alice received them in the run, so the prediction equals the running F bit for bit."""
        alice = self.federation.alice
        requests = [(n, PredictionRequest(alice, n, self.round, split, rows)) for n in self.federation.names]
        votes: list[dict[int, Tensor]] = []
        for reply in self.federation.request_all(requests):
            pairs = zip(reply.alphas.tolist(), reply.classes.items(), strict=True)
            votes.append({int(r): a * samme_code(c.long(), self.num_classes) for a, (r, c) in pairs})
        rows = next(v for by_round in votes for v in by_round.values()).shape[0]
        device = self.device
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


VARIANTS = {"ascii_simple": "simple", "ascii_random": "random", "ensemble_adaboost": "ensemble"}


def build(config, data, method: str, family) -> AssistedClassification:
    """ASCII, a variant or a reference over the ASCII family's agents (``family``: :class:`vcl.methods.ascii.ASCII`,
    which makes them)."""
    check_task(config, method, make_task(config, data))
    task, _, labels, fed = organizations(config, method, data, family)
    options = ASCIIOptions(**asdict(config.ascii), variant=VARIANTS.get(method, "ascii"))
    return AssistedClassification(task, fed, labels, options, config.run.seed, method)


def check_task(config: RunConfig, method: str, task) -> None:
    if task.kind != "classification":
        raise VCLInputError(
            f"method={method} is for classification; data.dataset={config.data.dataset!r} is a regression task."
        )
    if task.num_outputs < 2:
        raise VCLInputError(f"method={method} needs at least 2 classes in data.dataset={config.data.dataset!r}.")
