"""A transport written outside vcl, as docs/extending.md ("Write a transport") says one is written: the parties in
this process, but every message, reply and party-to-party message packed into a frame of vcl's wire format and
unpacked on the other side, as if it had crossed a network. ``tests/test_transport.py`` runs vcl's transport suite
on it (``transport.kind: tests.wire_transport.WireTransport``)."""

from __future__ import annotations

from vcl.messages import Message
from vcl.party.runtime import PartyRuntime
from vcl.transport import Parties, Transport
from vcl.transports.wire import pack_message, unpack_message

LIMIT = 2**30


def crossed(message: Message) -> Message:
    """``message`` as the receiving side reads it from its frame."""
    return unpack_message(pack_message(message), LIMIT)


class WireTransport(Transport):
    """Parties in this process, each message crossing as a frame."""

    @classmethod
    def open(cls, config, method: str, data, parties: Parties) -> WireTransport:
        return cls(parties.here(), parties.peer_messages)

    def __init__(self, parties: list, peer_messages):
        super().__init__([p.name for p in parties])
        self.runtimes = {p.name: PartyRuntime(p, p.name, peer_messages) for p in parties}

    def deliver(self, requests: list[tuple[str, Message]]) -> list[Message]:
        replies = [self.runtimes[party].handle(crossed(message)) for party, message in requests]
        return [None if reply is None else crossed(reply) for reply in replies]

    def relay(self, parties: list[str]) -> None:
        for party in parties:
            for record in self.runtimes[party].relay(self.send, self.names, crossed):
                self.channel.add(record)

    def send(self, message: Message) -> None:
        self.runtimes[message.receiver].forward(message)
