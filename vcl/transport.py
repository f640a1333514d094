"""How the coordinator reaches the parties: messages in, replies out, both counted in the run's ledger.

A :class:`Transport` delivers a message to the party it names and brings back the party's reply
(``party.handle(message)``). Nothing else crosses: the coordinator never calls a party's methods or
reads its attributes. Every message and every reply goes through the ledger (:class:`Channel`) the
same way whatever carries it, so a run's byte counts do not depend on the transport.

:class:`LocalTransport` keeps the parties in this process. Its ``request_all`` fits the parties that
received a fit request (a pseudo-residual, or labels) and share a learner architecture together in
one vmapped pass (:mod:`vcl.models.concurrent`) — a simulation speed-up inside the transport that no
protocol knows about; ``concurrent=False`` is the sequential reference (each party's ``handle``).

Some messages go from party to party, never through the coordinator (ASCII's ignorance scores, DC's
anchor shares, MPDL's PSI and Algorithm 2, FTL's codes): a party that handles a request may leave such
messages in its outbox, and after the request the transport relays each one — counted once in the
ledger, sender → receiver, and handed to the receiving party's ``handle`` (which answers nothing). The
coordinator neither sees nor holds them. :class:`vcl.ray_transport.RayTransport` puts each party in its
own process and implements the same calls; its relay hands party-to-party messages from actor to actor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from vcl.messages import Channel, Labels, Message, PseudoResidual
from vcl.runtime import PartyRuntime

FIT_REQUESTS = (PseudoResidual, Labels)
# What the local transport calls on a party besides ``handle``: the two halves of a fit, for the batched
# executor (:func:`vcl.models.concurrent.run_jobs`), the party's outbox of party-to-party messages, its own
# checkpoint, and the device it trains on (results.json says where each party ran).
LOCAL_CALLS = ("begin_fit", "finish_fit", "outgoing", "state_dict", "load_state_dict", "device")


class Transport:
    """Delivers messages to named parties and counts each message and reply in ``channel``."""

    def __init__(self, names: list[str], channel: Channel | None = None):
        self.names = list(names)
        self.channel = channel or Channel()
        self.party_roots: dict[str, Path] = {}  # a party's own checkpoint root, if not the run's (``party_dirs``)

    def root_of(self, name: str, root: Path) -> Path:
        """Where party ``name`` keeps its checkpoints: its own root if it has one, else ``root``."""
        return Path(self.party_roots.get(name, root))

    def request(self, party: str, message: Message) -> Message:
        """Send ``message`` to ``party``; its reply."""
        return self.request_all([(party, message)])[0]

    def request_all(self, requests: Iterable[tuple[str, Message]]) -> list[Message]:
        """Send every message (each to its party) and gather the replies, in the order given."""
        requests = list(requests)
        for party, message in requests:
            if party not in self.names or message.receiver != party:
                raise ValueError(f"a {message.kind} for {message.receiver!r} cannot go to party {party!r}.")
        delivered = [(party, self.channel.send(message)) for party, message in requests]
        replies = [self.channel.send(reply) for reply in self.deliver(delivered)]
        self.relay(list(dict.fromkeys(party for party, _ in requests)))
        return replies

    def relay(self, parties: list[str]) -> None:
        """Deliver what ``parties`` addressed to other parties: each message counted once (sender → receiver)
        and handed to its receiver, in the order sent. Alice's coordinator never gets these messages."""
        for party in parties:
            for message in self.outgoing(party):
                if message.sender != party or message.receiver not in self.names:
                    raise ValueError(
                        f"{party!r} cannot send a {message.kind} from {message.sender!r} to {message.receiver!r}."
                    )
                self.forward(message.receiver, self.channel.send(message))

    def deliver(self, requests: list[tuple[str, Message]]) -> list[Message]:
        """The replies to already counted messages (what a transport implements)."""
        raise NotImplementedError

    def outgoing(self, party: str) -> list[Message]:
        """The messages ``party`` has sent to other parties since last asked (what a transport implements)."""
        raise NotImplementedError

    def forward(self, party: str, message: Message) -> None:
        """Hand an already counted party-to-party message to ``party``; it answers nothing."""
        raise NotImplementedError

    def state_dict(self) -> list[dict]:
        """Every party's own state, in the order of ``names`` (an in-memory copy; a run's checkpoints use
        :meth:`save`, where each party writes its own)."""
        raise NotImplementedError

    def load_state_dict(self, states: list[dict]) -> None:
        raise NotImplementedError

    def save(self, root: Path, round_: int, run: str) -> None:
        """Every party writes its own state of ``round_`` under ``root/<name>/`` (or its own root), where it runs,
        stamped with ``run`` (the run's identity, :attr:`vcl.runner.Run.stamp`)."""
        raise NotImplementedError

    def load(self, root: Path, round_: int, run: str) -> None:
        """Every party reads back its own state of ``round_`` from ``root/<name>/``, refusing one of another run."""
        raise NotImplementedError

    def prune(self, root: Path, round_: int) -> None:
        """Every party removes its own files of rounds before ``round_`` (once the coordinator saved it)."""
        raise NotImplementedError

    def open_logs(self, root: Path) -> None:
        """Tell every party its own folder, ``root/<name>/`` (or under its own root), for the logs it writes where it
        runs (its Trainers' TensorBoard logs under ``run.engine: trainer``); nothing crosses."""
        raise NotImplementedError

    def where(self) -> list[dict]:
        """Where each party runs: ``{"name", "host", "pid", "device"}``, in the order of ``names``."""
        raise NotImplementedError

    def close(self) -> None:
        """Let the parties go (their processes end); the transport takes no request after this."""


class LocalTransport(Transport):
    """Parties in this process. ``concurrent``: fit same-architecture parties' requests in one pass."""

    def __init__(
        self, parties: Mapping[str, object] | list, channel: Channel | None = None, concurrent=True, peer_messages=None
    ):
        parties = dict(parties) if isinstance(parties, Mapping) else {p.name: p for p in parties}
        super().__init__(list(parties), channel)
        self._runtimes = {name: PartyRuntime(party, name, peer_messages) for name, party in parties.items()}
        self.concurrent = concurrent
        self._stacked: dict = {}  # the parties' inputs stacked for fits together (run_jobs), kept between rounds

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
            from vcl.models.concurrent import run_jobs

            run_jobs(jobs, concurrent=True, stacked=self._stacked)
            for i, p, job in zip(fits, parties, jobs, strict=True):
                replies[i] = p.finish_fit(job)
        for i, (party, message) in enumerate(requests):
            if replies[i] is None:
                replies[i] = self._runtimes[party].handle(message)
        return replies

    def outgoing(self, party: str) -> list[Message]:
        return self._runtimes[party].outgoing()

    def forward(self, party: str, message: Message) -> None:
        self._runtimes[party].forward(message)

    def state_dict(self) -> list[dict]:
        return [self._runtimes[n].state_dict() for n in self.names]

    def load_state_dict(self, states: list[dict]) -> None:
        for name, state in zip(self.names, states, strict=True):
            self._runtimes[name].load_state_dict(state)

    def save(self, root: Path, round_: int, run: str) -> None:
        for name in self.names:
            self._runtimes[name].save(self.root_of(name, root), round_, run)

    def load(self, root: Path, round_: int, run: str) -> None:
        for name in self.names:
            self._runtimes[name].load(self.root_of(name, root), round_, run)

    def prune(self, root: Path, round_: int) -> None:
        for name in self.names:
            self._runtimes[name].prune(self.root_of(name, root), round_)

    def open_logs(self, root: Path) -> None:
        for name in self.names:
            self._runtimes[name].open_logs(self.root_of(name, root))

    def where(self) -> list[dict]:
        return [self._runtimes[name].where() for name in self.names]
