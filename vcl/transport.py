"""How the coordinator reaches the parties: the transport contract (the docstrings below). A transport only
carries; the ledger, checkpoints and the parties left out are :class:`vcl.coordinator.federation.Federation`'s. How to
write one and the suite it must pass: docs/extending.md ("Write a transport")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vcl.classpath import import_class
from vcl.errors import Missing
from vcl.messages import Channel, Message
from vcl.registry import TRANSPORTS


@dataclass
class Parties:
    """What a transport is given to start a run's parties: their ``names`` (Alice or the coordinator's first
    counterpart first); ``here()``, which builds every one in this process; ``own(config, method, index, ids, kind,
    num_classes)``, which builds one where it runs, from its own copy of the config
    (:func:`vcl.party.loading.own_party`); ``peer_messages``: the kinds the family's parties send each other (a
    party's runtime refuses any other kind from another party); ``together``: ``run.concurrent``, whether parties of
    one class hosted in one process answer a batch together (:meth:`vcl.family.Party.handle_batch`)."""

    names: list[str]
    here: Callable[[], list]
    own: Callable
    peer_messages: tuple = ()
    together: bool = False


class Transport:
    """Delivers messages to named parties (``names``, Alice or the coordinator's first counterpart first); the
    coordinator counts each message and reply in ``channel``. ``placed``: where each party runs, as it said when it
    was started (None: ask it, :class:`vcl.messages.Where`); ``missing``: the parties the run goes on without."""

    apart = False  # True: each party runs in a process of its own and loads its own data there

    def __init__(self, names: list[str], channel: Channel | None = None, skip_missing: bool = False):
        self.names = list(names)
        self.channel = channel or Channel()
        self.placed: list[dict] | None = None
        self.missing = Missing(skip_missing)

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

    @classmethod
    def experiment(cls, config, task: Callable, *args):
        """``task(*args)`` run as the experimenter, who holds every organization's files (``train.py audit``, which
        scores the attacks on what each receiver kept against the run's data): here, where the parties run in this
        process; an ``apart`` transport runs it outside Alice's process (Ray: a task of the cluster), so that her
        process never opens another organization's file."""
        if cls.apart:
            raise NotImplementedError(f"{cls.__name__} runs its parties apart and has no experimenter's place")
        return task(*args)

    def deliver(self, requests: list[tuple[str, Message]]) -> list[Message]:
        """The replies to the messages, each handed to its party's runtime
        (:meth:`vcl.party.runtime.PartyRuntime.handle`), in the order given (a lost party's
        :class:`vcl.errors.PartyLost` may stand in its place); a message's ``during`` says when in the run it went,
        for the sentence about a party that did not answer."""
        raise NotImplementedError

    def relay(self, parties: list[str]) -> None:
        """Hand what ``parties`` addressed to other parties to their receivers, party to party
        (:meth:`vcl.party.runtime.PartyRuntime.relay`), and add the ledger's line for each to ``channel``. Alice's
        coordinator never gets these messages."""
        raise NotImplementedError

    def rejoin(self, party: str) -> bool:
        """Set ``party``, left out (:attr:`missing`), up again for the run if it answers now, as at the run's start
        (a new party runtime, its data read again); True once it is, False if it is still down or refused. It stays
        in :attr:`missing` until the coordinator takes it back. By default False: a transport whose parties cannot
        come back on their own (the coordinator's in-process parties, Ray's actors)."""
        return False

    def close(self) -> None:
        """Let the parties go (their processes end); the transport takes no request after this."""


def transport_class(kind: str) -> type[Transport]:
    """The transport ``transport.kind`` names: ``local``, ``ray``, ``grpc`` (:data:`vcl.registry.TRANSPORTS`) or
    the class path of one written outside vcl (``my_pkg.module.MyTransport``); one sentence if it is none."""

    path = TRANSPORTS.get(kind, kind)
    return import_class(path.replace(":", "."), f"transport.kind={kind}", Transport, "transport")
