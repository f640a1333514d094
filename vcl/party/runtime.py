"""One party, wherever it runs: the runtime every host hands messages to.

A transport only delivers. What a party does with what arrives is the same in this process
(:class:`vcl.transport.LocalTransport`), in a Ray actor (:mod:`vcl.transports.ray`) and in a gRPC party process
(:mod:`vcl.party.server`): it is built from its copy of the run's config by its family
(:func:`vcl.coordinator.build.own_party`), answers a message with its reply, hands over the messages it addressed to
other parties, checkpoints itself where it runs, opens its own logs and says where it runs.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Collection
from pathlib import Path

from vcl.messages import Message, MessageRecord, record_of
from vcl.storage.checkpoints import load_party, prune_party, save_party
from vcl.storage.logs import open_party_logs

# what a coordinator may ask every party besides handling its messages (``Transport.each``)
OPS = ("save", "load", "prune", "open_logs", "where", "state_dict", "load_state_dict")


class PartyRuntime:
    """One party: ``party`` (any object with ``name``, ``handle(message)``, ``state_dict()`` and
    ``load_state_dict()``), or none until :meth:`build` makes it from a config; ``name``: its name, when the host
    knows it already; ``peer_messages``: the message classes it takes from other parties (its family's; None: any)."""

    def __init__(self, party=None, name: str | None = None, peer_messages=None):
        self.party, self._name = party, name
        self.peer_kinds = None if peer_messages is None else {m.__name__ for m in peer_messages}

    def build(self, make, settings: dict, method: str, index: int, ids, kind: str, num_classes: int) -> dict:
        """Make party ``index`` of ``method`` from ``settings`` (a config as ``RunConfig.to_dict`` gives it) with
        ``make``, the run builder's party factory (:func:`vcl.coordinator.build.own_party`, handed in by the host);
        where it runs."""
        from vcl.config import RunConfig
        from vcl.family import family_of

        config = RunConfig.from_dict(settings)
        if hasattr(self.party, "close_logs"):  # the party of this process's last run
            self.party.close_logs()
        self.party = make(config, method, index, ids, kind, num_classes)
        self.peer_kinds = {m.__name__ for m in family_of(config, method).peer_messages}
        return self.where()

    @property
    def name(self) -> str:
        return self._name or self.party.name

    def handle(self, message: Message) -> Message | None:
        """The party's reply to ``message`` (None for a message that asks for none)."""
        return self.party.handle(message)

    def forward(self, message: Message) -> None:
        """A message from another party, which expects no reply; a kind the family's parties never send each other
        is refused before the party sees it (:class:`PermissionError`)."""
        if self.peer_kinds is not None and message.kind not in self.peer_kinds:
            raise PermissionError(
                f"{self.name} takes no {message.kind} from another party (only {', '.join(sorted(self.peer_kinds))})"
                if self.peer_kinds
                else f"{self.name} takes no message from another party in this method"
            )
        reply = self.party.handle(message)
        if reply is not None:
            raise TypeError(f"{self.name} answered a {message.kind} from {message.sender}: it expects no reply.")

    def outgoing(self) -> list[Message]:
        """The messages the party addressed to other parties since last asked (parties that never message each
        other have none)."""
        take = getattr(self.party, "outgoing", None)
        messages = [] if take is None else take()
        for message in messages:
            if message.sender != self.name:
                raise ValueError(f"{self.name} cannot send a {message.kind} from {message.sender!r}.")
        return messages

    def relay(self, send: Callable[[Message], None], peers: Collection[str], tap=None) -> list[MessageRecord]:
        """Hand each message the party addressed to another party to ``send`` (its host's way to reach that
        party: a call in this process, an actor's method, a TLS connection), in order, and one it addressed to itself
        (ASCII's booster keeps its own scores) to its own :meth:`forward`; ``tap``: what the run's ledger sees of each
        first (:attr:`vcl.messages.Channel.tap`, in this process). The ledger's lines for them, which go to the
        coordinator (the messages do not)."""
        records = []
        for message in self.outgoing():
            if message.receiver not in peers:
                raise ValueError(f"{self.name} cannot send a {message.kind} to {message.receiver!r}.")
            message = tap(message) if tap else message
            (self.forward if message.receiver == self.name else send)(message)
            records.append(record_of(message))
        return records

    def call(self, op: str, *args):
        """Operation ``op`` (one of :data:`OPS`) with its arguments: what ``Transport.each`` asks of every party."""
        if op not in OPS:
            raise PermissionError(f"{self.name} does no {op!r} (only {', '.join(OPS)})")
        return getattr(self, op)(*args)

    def save(self, root: str | Path, round_: int, run: str) -> None:
        save_party(self.party, self.name, Path(root), round_, run)

    def load(self, root: str | Path, round_: int, run: str) -> None:
        load_party(self.party, self.name, Path(root), round_, run)

    def prune(self, root: str | Path, round_: int) -> None:
        prune_party(self.name, Path(root), round_)

    def open_logs(self, root: str | Path) -> None:
        open_party_logs(self.party, self.name, Path(root))

    def where(self) -> dict:
        return party_place(self.name, self.party)

    def state_dict(self) -> dict:
        return self.party.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.party.load_state_dict(state)


def party_place(name: str, party) -> dict:
    """Where a party runs: this host and process, and the device it trains on (what it says: ``device()``)."""
    device = getattr(party, "device", "cpu")
    device = device() if callable(device) else device
    return {"name": name, "host": socket.gethostname(), "pid": os.getpid(), "device": str(device)}
