"""The federation seen from the coordinator: the parties' names, the run's ledger and the transport that reaches them.

Every family's coordinator holds one. GAL's adds Alice's privacy of the pseudo-residual and the scoring of what a
receiver reads of it (:class:`vcl.methods.gal.coordinator.GALFederation`).
"""

from __future__ import annotations

from torch import Tensor

from vcl.messages import Channel, Labels, ModelsRequest, PredictionRequest, PseudoResidual, as_float
from vcl.methods.organization import stack_replies
from vcl.transport import Transport
from vcl.transports.local import LocalTransport


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
        transport: Transport | None = None,
    ):
        self.transport = transport or LocalTransport(parties, channel, concurrent)
        self.parties_in_state = True  # False: each party checkpoints itself (Transport.save), not in Alice's state
        self.absent: list[int] = []  # the participants of the last fit that did not answer (run.missing_parties)

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
        self, round_: int, targets: Tensor, participants: list[int], labels: bool = False, loss: str | None = None
    ) -> dict[str, Tensor]:
        """Send ``targets`` to each participant, let each fit a fresh local model, gather its outputs:
        {split: (len(participants), N, K)}. ``labels=True`` sends the labels themselves, to be fitted with ``loss``
        (centralized baselines), instead of a pseudo-residual."""
        values = as_float(targets)
        return self.send_fits(round_, {m: values for m in participants}, values.device, labels, loss)

    def send_fits(
        self, round_: int, values: dict[int, Tensor], device, labels: bool = False, loss: str | None = None
    ) -> dict[str, Tensor]:
        """Send each participant ``m`` its ``values[m]`` to fit (as labels with ``loss``, or as a pseudo-residual);
        the outputs of those that answered (a party left out answers None: :attr:`absent` lists it) stacked in the
        order of ``values``."""
        requests = []
        for m, v in values.items():
            name = self.names[m]
            fit = Labels(self.alice, name, round_, v, loss=loss) if labels else None
            requests.append((name, fit or PseudoResidual(self.alice, name, round_, v)))
        replies = self.transport.request_all(requests)
        self.absent = [m for m, reply in zip(values, replies, strict=True) if reply is None]
        present = [r for r in replies if r is not None]
        return stack_replies(present, device) if present else {}

    def predictions(self, split: str, round_: int, rows: Tensor | None = None) -> list[dict[str, Tensor] | None]:
        """Prediction stage: each organization's {round: outputs} on its rows of ``split`` (``rows``: those of them,
        by position; None: left out)."""
        replies = self.transport.request_all(
            (n, PredictionRequest(self.alice, n, round_, split, rows)) for n in self.names
        )
        return [None if r is None else r.values for r in replies]

    def models(self, round_: int) -> list:
        """The :class:`ModelsReport` of each organization present (what it keeps for the prediction stage)."""
        replies = self.transport.request_all((n, ModelsRequest(self.alice, n, round_)) for n in self.names)
        return [r for r in replies if r is not None]

    def missing(self) -> list[str]:
        """The organizations left out so far (``run.missing_parties: skip``)."""
        return [n for n in self.names if n in self.transport.missing]

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
