"""The federation seen from Alice: the parties' names, her ledger, her privacy mechanism, and a transport."""

from __future__ import annotations

import torch
from torch import Tensor

from vcl.messages import Channel, Labels, ModelsRequest, PredictionRequest, PseudoResidual, as_float
from vcl.organization import seed_for, stack_replies
from vcl.transport import LocalTransport, Transport


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
    ):
        self.transport = transport or LocalTransport(parties, channel, concurrent)
        self.privacy = privacy  # a vcl.privacy mechanism applied to what Alice sends to the others
        # "others": Alice fits her own model on the clean residual; "all": on the same perturbed broadcast
        self.privacy_scope = privacy_scope
        self.parties_in_state = True  # False: each party checkpoints itself (Transport.save), not in Alice's state

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
    ) -> dict[str, Tensor]:
        """Send ``targets`` to each participant, let each fit a fresh local model, gather its outputs.

        Returns {split: (len(participants), N, K)}. ``labels=True`` sends the labels themselves, to be
        fitted with ``loss`` (centralized baselines), instead of a pseudo-residual. With a privacy
        mechanism, the others get one perturbed broadcast (seeded per round); Alice's own fit uses the
        clean values, or with ``privacy_scope="all"`` the same perturbed broadcast (the authors' code).
        Either way the returned outputs are weighed by Alice against the clean residual.
        """
        clean = as_float(targets)
        public = clean
        if self.privacy is not None and not labels:
            gen = torch.Generator(device=clean.device).manual_seed(seed_for(seed, round_, 0x9A11))
            public = self.privacy(clean, gen)
        requests = []
        for m in participants:
            name = self.names[m]
            values = clean if m == 0 and self.privacy_scope == "others" else public
            if labels:
                requests.append((name, Labels(self.alice, name, round_, values, loss=loss)))
            else:
                requests.append((name, PseudoResidual(self.alice, name, round_, values)))
        return stack_replies(self.transport.request_all(requests), clean.device)

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
        state = {"channel": self.channel.state_dict()}
        if self.parties_in_state:
            state["organizations"] = self.transport.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.channel.load_state_dict(state["channel"])
        if "organizations" in state:
            self.transport.load_state_dict(state["organizations"])
