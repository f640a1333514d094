"""The federation seen from Alice: the parties' names, her ledger, her privacy mechanism, and a transport."""

from __future__ import annotations

import secrets

import torch
from torch import Tensor

from vcl.loop import seed_for
from vcl.messages import Channel, Labels, ModelsRequest, PredictionRequest, PseudoResidual, as_float
from vcl.organization import stack_replies
from vcl.transport import LocalTransport, Transport

NOISE = 0x9A11  # the purpose tag of Alice's noise draws: seed_for(noise_secret, round, NOISE)
BLIND = 0xB11D  # other draws from her secret: the attack's estimate without the noise's own draws


LEAKS = ("label_attack_accuracy", "label_majority_rate", "residual_received_mae", "residual_attack_mae",
         "residual_blind_mae")  # fmt: skip


def leak_summary(records: list[dict]) -> dict[str, float]:
    """A run's leak scores over its round records: the labels the other organizations read in the round they read
    most (with the majority rate), the residual's errors averaged over the rounds (:meth:`Federation.leak`)."""
    out = {}
    for key in LEAKS:
        values = [r[key] for r in records if key in r]
        if values:
            out[key] = max(values) if key == "label_attack_accuracy" else sum(values) / len(values)
    return out


class Federation:
    """Parties (Alice first) reached only through ``transport``: messages out, replies in.

    ``parties`` builds a :class:`LocalTransport` over them (``concurrent``: same-architecture fits in
    one pass; ``False``: the plain sequential reference); or pass a ``transport``.
    """

    def __init__(
        self,
        parties: list | None = None,
        channel: Channel | None = None,
        concurrent=True,
        privacy=None,
        privacy_scope: str = "others",
        transport: Transport | None = None,
        noise_secret: int | None = None,
        known_seeds: tuple[int, ...] = (),
    ):
        self.transport = transport or LocalTransport(parties, channel, concurrent)
        self.privacy = privacy  # a vcl.privacy mechanism applied to what Alice sends to the others
        # "others": Alice fits her own model on the clean residual; "all": on the same perturbed broadcast
        self.privacy_scope = privacy_scope
        self.parties_in_state = True  # False: each party checkpoints itself (Transport.save), not in Alice's state
        # Alice's own secret, the seed of her noise: given (gal.privacy_secret, which no other party's copy of the
        # config holds) or fresh from the operating system; kept in her checkpoint, so a resumed run draws the same
        self.noise_secret = int(noise_secret) if noise_secret else secrets.randbits(62)
        self.known_seeds = tuple(known_seeds)  # every seed a receiver knows (the run config's): the attack's tries
        self.leaks: dict[int, dict[str, float]] = {}  # round → what a receiver recovers of the clean residual

    @property
    def channel(self) -> Channel:
        """Alice's ledger of every message and reply."""
        return self.transport.channel

    @property
    def names(self) -> list[str]:
        return self.transport.names

    @property
    def alice(self) -> str:
        return self.names[0]

    def __len__(self) -> int:
        return len(self.names)

    def gather_fits(
        self,
        round_: int,
        targets: Tensor,
        participants: list[int],
        seed: int,
        labels: bool = False,
        loss: str | None = None,
        truth: Tensor | None = None,
    ) -> dict[str, Tensor]:
        """Send ``targets`` to each participant, let each fit a fresh local model, gather its outputs.

        Returns {split: (len(participants), N, K)}. ``labels=True`` sends the labels themselves, to be
        fitted with ``loss`` (centralized baselines), instead of a pseudo-residual. With a privacy
        mechanism, the others get one perturbed broadcast (drawn per round from Alice's secret); her own fit uses the
        clean values, or with ``privacy_scope="all"`` the same perturbed broadcast (the authors' code).
        Either way the returned outputs are weighed by Alice against the clean residual. ``truth``: Alice's
        class labels of the rows, for scoring what the other organizations can read of them (:meth:`label_leak`).
        """
        clean = as_float(targets)
        public = clean
        others = any(m != 0 for m in participants)  # someone besides Alice receives it: what it reads is scored
        if self.privacy is not None and not labels:
            gen = torch.Generator(device=clean.device).manual_seed(seed_for(self.noise_secret, round_, NOISE))
            public = self.privacy(clean, gen)
            if others:
                self.leaks.setdefault(round_, {}).update(self.leak(clean, public, round_))
        if truth is not None and others:
            self.leaks.setdefault(round_, {}).update(self.label_leak(public, truth))
        requests = []
        for m in participants:
            name = self.names[m]
            values = clean if m == 0 and self.privacy_scope == "others" else public
            if labels:
                requests.append((name, Labels(self.alice, name, round_, values, loss=loss)))
            else:
                requests.append((name, PseudoResidual(self.alice, name, round_, values)))
        return stack_replies(self.transport.request_all(requests), clean.device)

    def leak(self, clean: Tensor, public: Tensor, round_: int) -> dict[str, float]:
        """What a receiver of the perturbed residual recovers, as mean absolute errors against the clean one:
        ``residual_received_mae`` taking the values as they came; ``residual_attack_mae`` the best of that and of
        redrawing the noise (:meth:`privacy.attack`, the clipping bounds given) from every seed it could derive from
        what it holds: each whole number of its config, alone, per round, per round and organization, and with the
        tag Alice's noise uses; ``residual_blind_mae`` the same estimate from draws it cannot know. With Alice's
        secret none of the seeds is hers: the attack does no better than the values as they came (Laplace) or than
        the blind estimate (interval privacy, whose values alone already say something)."""

        def attacked(seed: int) -> float:
            guess = self.privacy.attack(public, clean, torch.Generator(device=clean.device).manual_seed(seed))
            return float((guess - clean).abs().mean())

        received = float((public - clean).abs().mean())
        best = min([received, *(attacked(seed) for seed in self.candidate_seeds(round_))])
        blind = attacked(seed_for(self.noise_secret, round_, BLIND))  # from draws the receiver cannot know
        return {"residual_received_mae": received, "residual_attack_mae": best, "residual_blind_mae": blind}

    @staticmethod
    def label_leak(received: Tensor, truth: Tensor) -> dict[str, float]:
        """A curious organization's guess of Alice's class labels from what it received (N × K, one column per
        class): each row's largest entry. GAL's classification residual is onehot(y) − softmax(F), whose one
        positive entry is the label's (Late fusion sends the labels themselves). ``label_majority_rate``: the
        guess that knows nothing but the most frequent class."""
        truth = truth.reshape(-1).long().to(received.device)
        guess = received.argmax(1)
        majority = torch.bincount(truth).max() / truth.numel()
        return {
            "label_attack_accuracy": float((guess == truth).float().mean()),
            "label_majority_rate": float(majority),
        }

    def candidate_seeds(self, round_: int) -> list[int]:
        seeds = []
        for s in self.known_seeds:
            seeds += [s, seed_for(s, round_), seed_for(s, round_, NOISE), seed_for(s, NOISE)]
            seeds += [seed_for(s, round_, m) for m in range(len(self))]
        return list(dict.fromkeys(seeds))

    def predictions(self, split: str, round_: int) -> list[dict[str, Tensor]]:
        """Prediction stage: each organization's {round: outputs} on its rows of ``split``."""
        replies = self.transport.request_all((n, PredictionRequest(self.alice, n, round_, split)) for n in self.names)
        return [r.values for r in replies]

    def models(self, round_: int) -> list:
        """Each organization's :class:`ModelsReport` (what it keeps for the prediction stage)."""
        return self.transport.request_all((n, ModelsRequest(self.alice, n, round_)) for n in self.names)

    def state_dict(self) -> dict:
        """Alice's ledger, and the parties' states too unless each party keeps its own
        (``parties_in_state = False``: a run's checkpoints, :class:`vcl.callbacks.RoundCheckpoint`)."""
        state = {"channel": self.channel.state_dict(), "noise_secret": self.noise_secret, "leaks": dict(self.leaks)}
        if self.parties_in_state:
            state["organizations"] = self.transport.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.channel.load_state_dict(state["channel"])
        self.noise_secret = state.get("noise_secret", self.noise_secret)
        self.leaks = dict(state.get("leaks", {}))
        if "organizations" in state:
            self.transport.load_state_dict(state["organizations"])
