"""How the coordinator reaches the parties: the transport contract.

A :class:`Transport` delivers a message to the party it names and brings back the party's reply. Nothing else
crosses: the coordinator never calls a party's methods or reads its attributes. Every message and every reply goes
through the run's ledger (:class:`vcl.messages.Channel`) the same way whatever carries it, so a run's byte counts do
not depend on the transport. What a party does with what arrives is the one party runtime's
(:class:`vcl.party.runtime.PartyRuntime`), wherever the party runs; a transport only carries.

The contract, what a transport implements (docs/extending.md, "Write a transport"; the suite every transport passes,
:mod:`vcl.testing.suite`):

- ``open(config, method, data, parties)`` (a class method): the transport of one run, its parties started;
- ``deliver(requests)``: each ``(party, message)``, already counted, handed to that party's runtime; the replies (a
  party that is lost: its :class:`vcl.errors.PartyLost`, raised or in its place, which ``run.missing_parties: skip``
  turns into leaving it out, :meth:`Transport.tolerate`);
- ``relay(parties)``: the messages those parties addressed to other parties, handed party to party (never through
  the coordinator), each counted once in the ledger;
- ``each(op, args)``: a runtime operation (``save``, ``load``, ``prune``, ``open_logs``, ``where``,
  ``state_dict``, ``load_state_dict``) on every party, with that party's arguments; the answers;
- ``close()``: the parties go.

A transport whose parties run apart from the coordinator (``apart = True``: each loads its own data where it runs)
also answers ``psi_answers``, the parties' half of the row alignment of CSV files, and may refuse a config before
any work (``check``).

The transports themselves live in :mod:`vcl.transports`: ``local`` keeps the parties in this process, ``ray`` puts
each party in a Ray actor, ``grpc`` reaches parties on their own machines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from vcl.messages import Channel, Message


@dataclass
class Parties:
    """What a transport is given to start a run's parties: their ``names`` (Alice or the coordinator's first
    counterpart first); ``here()``, which builds every one in this process; ``own(config, method, index, ids, kind,
    num_classes)``, which builds one where it runs, from its own copy of the config
    (:func:`vcl.coordinator.build.own_party`); ``concurrent``: fit same-architecture parties together (the local
    transport's speed-up)."""

    names: list[str]
    here: Callable[[], list]
    own: Callable
    concurrent: bool = False


class Transport:
    """Delivers messages to named parties and counts each message and reply in ``channel``."""

    apart = False  # True: each party runs in a process of its own and loads its own data there

    def __init__(self, names: list[str], channel: Channel | None = None):
        self.names = list(names)
        self.channel = channel or Channel()
        self.party_roots: dict[str, Path] = {}  # a party's own checkpoint root, if not the run's (``party_dirs``)
        self.placed: list[dict] | None = None  # where each party runs, as it said when it was started (if kept)
        self.skip_missing = False  # run.missing_parties: skip (request_all)
        self.relays = True  # False: the method's parties send each other nothing (its family has no peer_messages)
        self.missing: dict[str, str] = {}  # the parties left out (skip_missing), and why

    # --- the contract: what a transport implements ---
    @classmethod
    def open(cls, config, method: str, data, parties: Parties) -> Transport:
        """The transport of one run of ``method``, its parties started: ``data`` is what the coordinator holds
        (everything, or for a transport whose parties run apart Alice's labels and the parties' names)."""
        raise NotImplementedError

    @classmethod
    def check(cls, config) -> None:
        """Refuse in one sentence (:class:`vcl.errors.VCLInputError`) a config this transport cannot run, before
        any work."""

    @classmethod
    def psi_answers(cls, config, names: list[str], drop: list[bool], offer, new: bool = False) -> list[dict]:
        """(``apart`` transports) Each party's but Alice's half of the row alignment of CSV files: its answer to
        Alice's blinded IDs, read from its own file where it runs (:func:`vcl.alignment.psi.answer_from_file`);
        ``new``: its file of new people (``data.predict_files``, for ``train.py predict``)."""
        raise NotImplementedError(f"{cls.__name__} runs the parties in this process, which reads every file")

    def deliver(self, requests: list[tuple[str, Message]]) -> list[Message]:
        """The replies to already counted messages, each handed to its party's runtime, in the order given (a lost
        party's :class:`vcl.errors.PartyLost` may stand in its place)."""
        raise NotImplementedError

    def relay(self, parties: list[str]) -> None:
        """Hand what ``parties`` addressed to other parties to their receivers, party to party
        (:meth:`vcl.party.runtime.PartyRuntime.relay`), and add the ledger's line for each to ``channel``. Alice's
        coordinator never gets these messages."""
        raise NotImplementedError

    def each(self, op: str, args: dict[str, tuple]) -> list:
        """Runtime operation ``op`` (one of :data:`vcl.party.runtime.OPS`) at every party in ``args``, with its
        arguments; the answers, in the order of ``args``."""
        raise NotImplementedError

    def close(self) -> None:
        """Let the parties go (their processes end); the transport takes no request after this."""

    # --- what the coordinator uses, the same for every transport ---
    def root_of(self, name: str, root: Path) -> Path:
        """Where party ``name`` keeps its checkpoints: its own root if it has one, else ``root``."""
        return Path(self.party_roots.get(name, root))

    def request(self, party: str, message: Message) -> Message:
        """Send ``message`` to ``party``; its reply."""
        return self.request_all([(party, message)])[0]

    def request_all(self, requests: Iterable[tuple[str, Message]]) -> list[Message | None]:
        """Send every message (each to its party) and gather the replies, in the order given. A party that is lost
        ends the run (:class:`vcl.errors.PartyLost`); with ``skip_missing`` (``run.missing_parties: skip``) any party
        but the first (Alice's) is left out instead: its place holds None, now and in every later request, and
        :attr:`missing` says why."""
        requests = list(requests)
        for party, message in requests:
            if party not in self.names or message.receiver != party:
                raise ValueError(f"a {message.kind} for {message.receiver!r} cannot go to party {party!r}.")
        reach = [(party, message) for party, message in requests if party not in self.missing]
        delivered = [(party, self.channel.send(message)) for party, message in reach]
        answers = (
            dict(zip((id(m) for _, m in reach), self.tolerate(self.deliver(delivered)), strict=True)) if reach else {}
        )
        replies = [answers.get(id(message)) for _, message in requests]
        if self.relays:  # else no call: under grpc or ray a relay is one more call to every party asked
            self.relay(list(dict.fromkeys(party for party, _ in reach if party not in self.missing)))
        return [None if reply is None else self.channel.send(reply) for reply in replies]

    def tolerate(self, answers: list) -> list:
        """Answers of several parties, where a lost one may stand as its :class:`PartyLost` (a transport's
        ``deliver`` and ``each`` may return one in a party's place): raised, unless ``skip_missing`` leaves that
        party out (Alice's never), then None in its place."""
        from vcl.errors import PartyLost

        out = []
        for answer in answers:
            if isinstance(answer, PartyLost):
                if not self.skip_missing or answer.party == self.names[0]:
                    raise answer
                self.missing[answer.party] = str(answer)
                answer = None
            out.append(answer)
        return out

    def _every(self, op: str, *args, root: Path | None = None) -> list:
        """``op`` at every party still present (a party left out keeps its files of the rounds it was in)."""
        rooted = lambda n: (str(self.root_of(n, root)),) if root is not None else ()  # noqa: E731
        present = [n for n in self.names if n not in self.missing]
        return self.tolerate(self.each(op, {n: (*rooted(n), *args) for n in present}))

    def save(self, root: Path, round_: int, run: str) -> None:
        """Every party writes its own state of ``round_`` under ``root/<name>/`` (or its own root), where it runs,
        stamped with ``run`` (the run's identity, :attr:`vcl.coordinator.runner.Run.stamp`)."""
        self._every("save", round_, run, root=root)

    def load(self, root: Path, round_: int, run: str) -> None:
        """Every party reads back its own state of ``round_`` from ``root/<name>/``, refusing one of another run."""
        self._every("load", round_, run, root=root)

    def prune(self, root: Path, round_: int) -> None:
        """Every party removes its own files of rounds before ``round_`` (once the coordinator saved it)."""
        self._every("prune", round_, root=root)

    def open_logs(self, root: Path) -> None:
        """Tell every party its own folder, ``root/<name>/`` (or under its own root), for the logs it writes where it
        runs (its Trainers' TensorBoard logs under ``run.engine: trainer``); nothing crosses."""
        self._every("open_logs", root=root)

    def where(self) -> list[dict]:
        """Where each party runs: ``{"name", "host", "pid", "device"}``, in the order of ``names`` (what the parties
        said when they were started, if the transport kept it in ``placed``)."""
        return list(self.placed) if self.placed is not None else self._every("where")

    def state_dict(self) -> list[dict]:
        """Every party's own state, in the order of ``names`` (an in-memory copy; a run's checkpoints use
        :meth:`save`, where each party writes its own)."""
        return self._every("state_dict")

    def load_state_dict(self, states: list[dict]) -> None:
        self.each("load_state_dict", {n: (s,) for n, s in zip(self.names, states, strict=True)})


def transport_class(kind: str) -> type[Transport]:
    """The transport ``transport.kind`` names: ``local``, ``ray``, ``grpc`` (:data:`vcl.registry.TRANSPORTS`) or
    the class path of one written outside vcl (``my_pkg.module.MyTransport``); one sentence if it is none."""
    from vcl.classpath import import_class
    from vcl.registry import TRANSPORTS

    path = TRANSPORTS.get(kind, kind)
    return import_class(path.replace(":", "."), f"transport.kind={kind}", Transport, "transport")
