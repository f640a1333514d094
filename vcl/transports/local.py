"""The transport that keeps the parties in this process (``transport.kind: local``, the default).

It only carries: every message goes to the one :class:`vcl.party.runtime.PartyHost` of this process's parties
(with ``run.concurrent``, a batch to their class's ``handle_batch``: docs/transport.md)."""

from __future__ import annotations

from collections.abc import Mapping

from vcl.messages import Channel, Message
from vcl.party.runtime import PartyHost, PartyRuntime
from vcl.transport import Parties, Transport


class LocalTransport(Transport):
    """Parties in this process, answered by their :class:`vcl.party.runtime.PartyHost` (``together``: parties of one
    class answer a batch together; else each alone, in order)."""

    def __init__(
        self,
        parties: Mapping[str, object] | list,
        channel: Channel | None = None,
        together: bool = False,
        peer_messages=None,
        skip_missing: bool = False,
    ):
        parties = dict(parties) if isinstance(parties, Mapping) else {p.name: p for p in parties}
        super().__init__(list(parties), channel, skip_missing)
        runtimes = {name: PartyRuntime(party, name, peer_messages) for name, party in parties.items()}
        self.host = PartyHost(runtimes, together)

    @classmethod
    def open(cls, config, method: str, data, parties: Parties) -> LocalTransport:
        skip = config.run.missing_parties == "skip"
        return cls(parties.here(), None, parties.together, parties.peer_messages, skip)

    def party(self, name: str):
        """The party object itself: for what happens at the party (its own new rows) and for tests; a
        coordinator never uses it."""
        return self.host.runtimes[name].party

    def deliver(self, requests: list[tuple[str, Message]]) -> list[Message]:
        return self.host.handle_all(requests)

    def relay(self, parties: list[str]) -> None:
        for party in parties:  # the ledger's tap sees each message, as it sees what the coordinator sends
            for record in self.host.runtimes[party].relay(self._forward, self.names, self.channel.tap):
                self.channel.add(record)

    def _forward(self, message: Message) -> None:
        self.host.runtimes[message.receiver].forward(message)
