"""The transport that keeps the parties in this process (``transport.kind: local``, the default).

Its ``deliver`` fits the parties that received a fit request (a pseudo-residual, or labels) and share a learner
architecture together in one vmapped pass (:mod:`vcl.engine.concurrent`): a simulation speed-up inside the transport
that no protocol knows about; ``concurrent=False`` is the sequential reference (each party's ``handle``).
"""

from __future__ import annotations

from collections.abc import Mapping

from vcl.messages import Channel, Labels, Message, PseudoResidual
from vcl.party.runtime import PartyRuntime
from vcl.transport import Parties, Transport

FIT_REQUESTS = (PseudoResidual, Labels)
# What the local transport calls on a party besides ``handle``: the two halves of a fit, for the batched
# executor (:func:`vcl.engine.concurrent.fit_jobs`), the party's outbox of party-to-party messages, its own
# checkpoint, and the device it trains on (results.json says where each party ran).
LOCAL_CALLS = ("begin_fit", "finish_fit", "outgoing", "state_dict", "load_state_dict", "device")


class LocalTransport(Transport):
    """Parties in this process. ``concurrent``: fit same-architecture parties' requests in one pass."""

    def __init__(
        self, parties: Mapping[str, object] | list, channel: Channel | None = None, concurrent=True, peer_messages=None
    ):
        parties = dict(parties) if isinstance(parties, Mapping) else {p.name: p for p in parties}
        super().__init__(list(parties), channel)
        self._runtimes = {name: PartyRuntime(party, name, peer_messages) for name, party in parties.items()}
        self.concurrent = concurrent
        self._stacked: dict = {}  # the parties' inputs stacked for fits together (fit_jobs), kept between rounds

    @classmethod
    def open(cls, config, method: str, data, parties: Parties) -> LocalTransport:
        from vcl.family import family_of

        return cls(parties.here(), concurrent=parties.concurrent, peer_messages=family_of(config, method).peer_messages)

    def party(self, name: str):
        """The party object itself: for what happens at the party (its own new rows) and for tests; a
        coordinator never uses it."""
        return self._runtimes[name].party

    def deliver(self, requests: list[tuple[str, Message]]) -> list[Message]:
        fits = [i for i, (_, m) in enumerate(requests) if isinstance(m, FIT_REQUESTS)]
        replies: list[Message | None] = [None] * len(requests)
        if self.concurrent and len(fits) > 1:
            parties = [self._runtimes[requests[i][0]].party for i in fits]
            jobs = [p.begin_fit(requests[i][1]) for p, i in zip(parties, fits, strict=True)]
            from vcl.engine.concurrent import fit_jobs

            fit_jobs(jobs, concurrent=True, stacked=self._stacked)
            for i, p, job in zip(fits, parties, jobs, strict=True):
                replies[i] = p.finish_fit(job)
        for i, (party, message) in enumerate(requests):
            if replies[i] is None:
                replies[i] = self._runtimes[party].handle(message)
        return replies

    def relay(self, parties: list[str]) -> None:
        for party in parties:  # the ledger's tap sees each message, as it sees what the coordinator sends
            for record in self._runtimes[party].relay(self._forward, self.names, self.channel.tap):
                self.channel.add(record)

    def _forward(self, message: Message) -> None:
        self._runtimes[message.receiver].forward(message)

    def each(self, op: str, args: dict[str, tuple]) -> list:
        return [self._runtimes[name].call(op, *a) for name, a in args.items()]
