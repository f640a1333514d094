"""The federation seen from the coordinator: the parties' names, the run's ledger and the transport that reaches them.
A family adds what it asks of its parties (:class:`vcl.methods.assisted.OrganizationFederation`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from vcl.config import RunConfig
from vcl.config.resolve import per_organization
from vcl.errors import VCLInputError
from vcl.messages import Channel, Load, LoadState, Message, OpenLogs, Prune, RuntimeRequest, Save, StateRequest, Where
from vcl.party.loading import own_party
from vcl.storage.kept import KeptMessages
from vcl.transport import Parties, Transport, transport_class
from vcl.transports.local import LocalTransport

if TYPE_CHECKING:
    from vcl.family import Family


class Federation:
    """Parties (Alice first) reached only through ``transport``, each message and reply counted in the run's ledger:
    (docs/extending.md, "Write a transport"). ``parties`` builds a :class:`LocalTransport` over them, or pass a
    ``transport``; ``relays``: whether the family has ``peer_messages``; ``party_roots``: ``transport.party_dirs``."""

    def __init__(
        self,
        parties: list | None = None,
        channel: Channel | None = None,
        together: bool = False,
        transport: Transport | None = None,
        relays: bool = True,
        party_roots: dict[str, Path] | None = None,
    ):
        self.transport = transport or LocalTransport(parties, channel, together)
        self.relays = relays
        self.party_roots = dict(party_roots or {})
        self.root: Path | None = None  # the run's folder of the parties' own files (keep_files); None: in Alice's state
        self.saved: dict[str, int] = {}  # each party's last round kept in its own files (save), for a rejoin
        self.returned: list[str] = []  # the parties left out at a checkpoint's round that its load took back
        self.seen = KeptMessages()  # what Alice sent and received, kept in <run>/messages/ (keep_files)
        self.seen_folder: Path | None = None

    @classmethod
    def open(
        cls, config: RunConfig, family: Family, method: str, data, names: list[str], parties, **kwargs
    ) -> Federation:
        """What every family's coordinator starts from: its federation (this class, the family's own, with ``kwargs``)
        over ``transport.kind``'s transport to ``method``'s parties ``names`` (``parties()`` builds them here)."""
        start = Parties(list(names), parties, own_party, tuple(family.peer_messages), config.run.concurrent)
        transport = transport_class(config.transport.kind).open(config, method, data, start)
        transport.channel.outside = frozenset(family.outside)  # its experimenter's messages are not communication
        relays = bool(family.peer_messages)  # GAL's parties send each other nothing: no relay is asked for
        return cls(transport=transport, relays=relays, party_roots=party_roots(config, transport.names), **kwargs)

    # --- reaching the parties ---
    def request(self, party: str, message: Message) -> Message:
        """Send ``message`` to ``party``; its reply."""
        return self.request_all([(party, message)])[0]

    def request_all(self, requests: Iterable[tuple[str, Message]]) -> list[Message | None]:
        """Send every message (each to its party) and gather the replies, in order. A lost party ends the run
        (:class:`vcl.errors.PartyLost`), or under ``run.missing_parties: skip`` (not Alice) holds None from then on."""
        requests = list(requests)
        t, lost = self.transport, self.transport.missing
        for party, message in requests:
            if party not in t.names or message.receiver != party:
                raise ValueError(f"a {message.kind} for {message.receiver!r} cannot go to party {party!r}.")
        reach = [(party, message) for party, message in requests if party not in lost]
        delivered = [(party, self.channel.send(message)) for party, message in reach]
        answers = lost.tolerate(t.deliver(delivered), self.alice) if reach else []
        by_message = dict(zip((id(m) for _, m in reach), answers, strict=True))
        replies = [by_message.get(id(message)) for _, message in requests]
        if self.relays:
            t.relay(list(dict.fromkeys(party for party, _ in reach if party not in lost)))
        for _, message in reach:  # what Alice sent and got back (not what a party left out was never sent)
            self.seen.add("out", message)
            self.seen.add("in", by_message.get(id(message)))
        return [None if reply is None else self.channel.send(reply) for reply in replies]

    def _every(self, request: Callable[[str], RuntimeRequest], names: list[str] | None = None) -> list:
        """``request(name)`` (a :class:`vcl.messages.RuntimeRequest`) to every party still present (or to ``names``),
        answered by its runtime; the replies in that order, None for one lost now. Not in the ledger."""
        names = self.present() if names is None else names
        replies = self.transport.deliver([(n, request(n)) for n in names])
        return self.transport.missing.tolerate(replies, self.alice)

    def present(self) -> list[str]:
        """The parties not left out."""
        return [n for n in self.names if n not in self.transport.missing]

    def _root(self, name: str) -> str:
        return str(self.party_roots.get(name, self.root))

    # --- the parties' own files, where each runs ---
    def keep_files(self, root: Path, messages: Path | None = None, rows: int = 0) -> None:
        """From now on each party keeps its own files under ``root/<name>/`` (or its own root), where it runs: its
        logs and checkpoints; Alice's state then holds her side only. ``messages``: her folder of kept messages
        (``run.keep_messages``); then each party keeps its own too (:mod:`vcl.storage.kept`), ``rows`` rows at most."""
        self.root = Path(root)
        self.seen.on, self.seen.rows, self.seen_folder = messages is not None, rows, messages
        keep = messages is not None
        self._every(lambda n: OpenLogs(self.alice, n, 0, root=self._root(n), keep_messages=keep, keep_rows=rows))

    def save(self, round_: int, run: str) -> None:
        """Every party writes its own state of ``round_``, stamped with ``run`` (the run's identity,
        :attr:`vcl.coordinator.runner.Run.stamp`)."""
        names = self.present()
        replies = self._every(lambda n: Save(self.alice, n, round_, root=self._root(n), run=run), names)
        self.saved.update({n: round_ for n, reply in zip(names, replies, strict=True) if reply is not None})
        if self.seen_folder is not None:
            self.seen.save(self.seen_folder, round_)

    def load(self, round_: int, run: str, root: Path | None = None, kept: dict | None = None) -> None:
        """Every party reads back its own state of ``round_``, refusing one of another run; ``root``: the run's folder
        of the parties' files, where :meth:`keep_files` was not called. ``kept``: the checkpoint's :meth:`state_dict`;
        a party left out at ``round_`` reads its own last round instead, back only if it :meth:`can_rejoin`."""
        self.root = Path(root) if root is not None else self.root
        kept = kept if kept is not None and "saved" in kept else None  # a checkpoint made before rejoins: all at round_
        self._keep_rounds(kept or {})
        rounds = {n: self.saved.get(n) if kept else round_ for n in self.present()}  # None: it saved no round
        for name, own in rounds.items():
            if own != round_ and not self.can_rejoin(name):
                self.transport.missing.leave(name, f"party {name} is left out: its last checkpoint (round {own}) "
                                             f"lacks {self.since(name)}")  # fmt: skip
        names = [n for n in self.present() if rounds[n] is not None]
        self._every(lambda n: Load(self.alice, n, rounds[n], root=self._root(n), run=run), names)
        self.saved.update({n: rounds[n] for n in names})
        self.seen.forget()
        self.returned = [n for n in self.present() if rounds[n] != round_]

    def can_rejoin(self, name: str) -> bool:
        """Whether party ``name``, left out, can come back from its own last checkpoint: here always; a federation
        whose parties keep work done between checkpoints says when not (:meth:`since` says what is lacking)."""
        return True

    def since(self, name: str) -> str:
        """What party ``name``'s last checkpoint lacks, where :meth:`can_rejoin` says it cannot come back."""
        return "what it did after it"

    def rejoin(self, run: str) -> list[str]:
        """Set up again each party left out that answers now and :meth:`can_rejoin`, from its own checkpoint of its last
        saved round (``run``: the run's stamp); the names that came back, those a resumed :meth:`load` took first."""
        back, self.returned = self.returned, []
        for name in self.missing():
            if self.root is None or not self.can_rejoin(name) or not self.transport.rejoin(name):
                continue
            self.transport.missing.back(name)
            if name in self.saved:
                try:
                    [loaded] = self._every(
                        lambda n: Load(self.alice, n, self.saved[n], root=self._root(n), run=run), [name]
                    )
                    if loaded is None:
                        continue  # lost again: left out, as before
                except VCLInputError as err:  # its files are gone or not this run's: it stays out, saying why
                    self.transport.missing.leave(name, str(err))
                    continue
            back.append(name)
        return back

    def prune(self, round_: int) -> None:
        """Every party removes its own files of rounds before ``round_`` (once the coordinator saved it)."""
        self._every(lambda n: Prune(self.alice, n, round_, root=self._root(n)))

    def where(self) -> list[dict]:
        """Where each party runs: ``{"name", "host", "pid", "device"}``, in the order of ``names`` (what the parties
        said when they were started, if the transport kept it in ``placed``)."""
        placed = self.transport.placed
        if placed is not None:
            return list(placed)
        return [r.place for r in self._every(lambda n: Where(self.alice, n, 0)) if r is not None]

    def close(self) -> None:
        """The parties go."""
        self.transport.close()

    @property
    def channel(self) -> Channel:
        """Alice's ledger of every message and reply."""
        return self.transport.channel

    @property
    def names(self) -> list[str]:
        return self.transport.names

    @property
    def members(self) -> list[str]:
        """The parties in the protocol: every name but those outside it (an experimenter, ``Family.outside``)."""
        return [n for n in self.names if n not in self.transport.channel.outside]

    @property
    def alice(self) -> str:
        return self.names[0]

    def __len__(self) -> int:
        return len(self.names)

    def missing(self) -> list[str]:
        """The organizations left out so far (``run.missing_parties: skip``)."""
        return [n for n in self.names if n in self.transport.missing]

    def state_dict(self) -> dict:
        """Alice's ledger, and the parties' states too unless each party keeps its own files (:meth:`keep_files`:
        a run's checkpoints)."""
        state = {"channel": self.channel.state_dict(), "saved": dict(self.saved)}
        if self.root is None:
            state["organizations"] = [r.state for r in self._every(lambda n: StateRequest(self.alice, n, 0))]
        return state

    def _keep_rounds(self, state: dict) -> None:
        """:attr:`saved` as a checkpoint's state kept it (none in one made before rejoins)."""
        self.saved = {n: int(r) for n, r in state.get("saved", {}).items()}

    def load_state_dict(self, state: dict) -> None:
        self.channel.load_state_dict(state["channel"])
        self._keep_rounds(state)
        if "organizations" in state:
            states = dict(zip(self.names, state["organizations"], strict=True))
            self.transport.deliver([(n, LoadState(self.alice, n, 0, state=s)) for n, s in states.items()])


def party_roots(config: RunConfig, names: list[str]) -> dict[str, Path]:
    """Each party's own root of checkpoints where ``transport.party_dirs`` names one (``names``: the run's parties,
    in order); the others keep theirs in the run's folder."""
    dirs = per_organization(config.transport.party_dirs, len(names), "transport.party_dirs", "parties")
    return {name: Path(d) for name, d in zip(names, dirs, strict=True) if d}
