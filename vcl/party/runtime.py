"""One party, wherever it runs: the runtime every transport hands messages to (:class:`PartyRuntime`: build,
answer, relay, checkpoint, logs), and the host of several (:class:`PartyHost`, which hands a batch to their class's
:meth:`vcl.family.Party.handle_batch`). docs/design.md ("A map for newcomers")."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from collections.abc import Callable, Collection
from pathlib import Path

from vcl import messages as requests  # the runtime's own requests: requests.Save, requests.Where, ...
from vcl.config import RunConfig
from vcl.family import Party, family_of
from vcl.messages import Ack, Message, MessageRecord, RuntimeRequest, record_of
from vcl.storage.checkpoints import kept_preparation, load_party, party_file, prune_party, run_of, save_party
from vcl.storage.kept import FOLDER, KeptMessages


class PartyRuntime:
    """One party: ``party`` (a :class:`vcl.family.Party`), or none until :meth:`make_party` makes it from a config;
    ``peer_messages``: the message classes it takes from other parties (None: any). ``root``: its own folder when it
    runs on its own machine (None: the coordinator's), each run's checkpoints in ``<root>/<name>/<run id>/``.
    ``keep``: whether it keeps the messages it receives and sends, its own choice (None: as ``OpenLogs`` asks)."""

    def __init__(
        self, party: Party | None = None, name: str | None = None, peer_messages=None, root: str | Path | None = None,
        keep: bool | None = None,
    ):  # fmt: skip
        self.party, self._name, self.root, self.keep = checked_party(party), name, root, keep
        self.run: str | None = None  # the run it serves, from its first Save or Load (the run's stamp's identity)
        self.saved_in: Path | None = None  # its own folder on its own root, once it saved a round of its run there
        self.peer_kinds = None if peer_messages is None else {m.__name__ for m in peer_messages}
        self.seen = KeptMessages()  # what crosses its boundary, kept with its checkpoints (OpenLogs.keep_messages)

    def make_party(self, make, settings: dict, method: str, index: int, ids, kind: str, num_classes: int) -> dict:
        """Make party ``index`` of ``method`` from ``settings`` (a config as ``RunConfig.to_dict`` gives it) with
        ``make``, the party factory the host hands in (:func:`vcl.party.loading.own_party`)."""

        config = RunConfig.from_dict(settings)
        if self.party is not None:  # the party of this process's last run
            with contextlib.suppress(OSError):
                self.party.close_logs()
        if isinstance(ids, dict) and ids.get("checkpoints") is not None:  # a finished run's: built again on new rows
            ids = {"rows": ids["rows"], "new": ids["new"], "kept": self.kept(ids["checkpoints"], config, index)}
        self.party = checked_party(make(config, method, index, ids, kind, num_classes))
        self.run = None
        self.seen = KeptMessages()
        self.peer_kinds = {m.__name__ for m in family_of(config, method).peer_messages}
        return self.where()

    def kept(self, where: dict, config: RunConfig, index: int) -> dict:
        """The preparation this party kept in its own checkpoint of a finished run (``where``: the run's stamp, each
        party's last saved round and folder, :func:`vcl.use.predict.kept_location`), to prepare its new rows with:
        read from its own root when it has one, else from the folder the coordinator names."""
        fields = isinstance(where, dict) and all(isinstance(where.get(k), dict) for k in ("rounds", "roots"))
        if not fields or not isinstance(where.get("root"), str):
            raise TypeError("the Setup's place of the party's checkpoint is malformed")  # a malformed request
        name = self._name or Path(config.data.csv_files[index]).stem
        round_ = where["rounds"].get(name)
        if round_ is None:  # left out from the run's first round on: it kept no model, and prepares no rows
            return {}
        if type(round_) is not int:
            raise TypeError("the Setup's round of the party's checkpoint is not a whole number")  # a malformed request
        run = str(where["run"])
        try:
            own = run_of(run) if self.root is not None else ""
        except ValueError as err:
            raise TypeError(str(err)) from None  # a malformed request
        folder = Path(self.root or where["roots"].get(name) or where["root"])
        return kept_preparation(name, folder, round_, run, own)

    def close(self) -> None:
        """Close what the party holds open where it runs (its logs: a TensorBoard writer and its thread) and let the
        party go: a party process serves one run after another, and a run it no longer serves keeps nothing."""
        if self.party is not None:
            with contextlib.suppress(OSError):  # a log whose folder went away: nothing more to write to it
                self.party.close_logs()
        self.party, self.peer_kinds, self.seen = None, set(), KeptMessages()

    @property
    def name(self) -> str:
        return self._name or self.party.name

    def handle(self, message: Message) -> Message | None:
        """The party's reply to ``message`` (None for a message that asks for none); a request for the runtime itself
        (:class:`vcl.messages.RuntimeRequest`) its :meth:`answer`."""
        if isinstance(message, RuntimeRequest):
            return self.answer(message)
        return PartyRuntime.handle_batch([self], [message])[0]

    @staticmethod
    def handle_batch(runtimes: list[PartyRuntime], messages: list[Message]) -> list[Message | None]:
        """Each runtime's party's reply to its message, the parties (all of one class) answering together through
        their class's :meth:`vcl.family.Party.handle_batch`; each runtime keeps what crossed its boundary."""
        for runtime, message in zip(runtimes, messages, strict=True):
            runtime.seen.add("in", message)
        replies = type(runtimes[0].party).handle_batch([r.party for r in runtimes], messages)
        for runtime, reply in zip(runtimes, replies, strict=True):
            runtime.seen.add("out", reply)
        return replies

    def forward(self, message: Message) -> None:
        """A message from another party, which expects no reply; a kind the family's parties never send each other
        is refused before the party sees it (:class:`PermissionError`)."""
        if self.peer_kinds is not None and message.kind not in self.peer_kinds:
            raise PermissionError(
                f"{self.name} takes no {message.kind} from another party (only {', '.join(sorted(self.peer_kinds))})"
                if self.peer_kinds
                else f"{self.name} takes no message from another party in this method"
            )
        self.seen.add("in", message)
        reply = self.party.handle(message)
        if reply is not None:
            raise TypeError(f"{self.name} answered a {message.kind} from {message.sender}: it expects no reply.")

    def outgoing(self) -> list[Message]:
        """The messages the party addressed to other parties since last asked (parties that never message each
        other have none)."""
        messages = self.party.outgoing()
        for message in messages:
            if message.sender != self.name:
                raise ValueError(f"{self.name} cannot send a {message.kind} from {message.sender!r}.")
            self.seen.add("out", message)
        return messages

    def relay(self, send: Callable[[Message], None], peers: Collection[str], tap=None) -> list[MessageRecord]:
        """Hand each message the party addressed to another to ``send`` (its host's way to reach it), in order, one to
        itself to its own :meth:`forward`; ``tap``: what the ledger sees first. Returns the ledger's lines for them."""
        records = []
        for message in self.outgoing():
            if message.receiver not in peers:
                raise ValueError(f"{self.name} cannot send a {message.kind} to {message.receiver!r}.")
            message = tap(message) if tap else message
            (self.forward if message.receiver == self.name else send)(message)
            records.append(record_of(message))
        return records

    def answer(self, request: RuntimeRequest) -> Message:
        """The runtime's own answer to a :class:`vcl.messages.RuntimeRequest` (the party's files, its state, where
        it runs): an :class:`Ack`, a :class:`Placed` or a :class:`PartyState`."""
        back = dict(sender=self.name, receiver=request.sender, round=request.round)
        if isinstance(request, requests.Where):
            return requests.Placed(**back, place=self.where())
        if isinstance(request, requests.StateRequest):
            return requests.PartyState(**back, state=self.party.state_dict())
        if isinstance(request, requests.LoadState):
            self.party.load_state_dict(request.state)
            return Ack(**back)
        if not request.root and self.root is None:
            raise TypeError(f"a {request.kind} names no folder")
        folder = Path(self.root or request.root)
        if isinstance(request, requests.OpenLogs):  # the party learns its own folder root/<name>/, for its logs
            self.party.open_logs(party_file(folder, self.name, 0).parent)
            self.seen.on = request.keep_messages is True if self.keep is None else self.keep
            if type(request.keep_rows) is not int or request.keep_rows < 0:  # a request from the network
                raise TypeError("the rows to keep are not a whole number")
            self.seen.rows = request.keep_rows
            return Ack(**back)
        if type(request.round) is not int:  # a request from the network: its round is the checkpoints' to check
            raise TypeError("the round is not a whole number")
        if isinstance(request, (requests.Save, requests.Load)):
            run = self.serve(request)
            own = run if self.root is not None else ""  # its own root: each run's files in their own folder
            if isinstance(request, requests.Save) and self.saved_in is not None and not self.saved_in.is_dir():
                self.party.close_logs()  # its writer's file went with the folder: a new one once the folder is back
                raise FileNotFoundError(
                    errno.ENOENT, "the party's folder was removed while it served this run (its earlier checkpoints "
                    "and logs with it); put it back and --resume, or start the run afresh", str(self.saved_in),
                )  # fmt: skip
            if isinstance(request, requests.Save):  # its checkpoint of the round, then that round's line in its log
                save_party(self.party, self.name, folder, request.round, str(request.run), own)
                self.seen.save(party_file(folder, self.name, request.round, own).parent / FOLDER, request.round)
                self.saved_in = folder / self.name if self.root is not None else None
                self.party.log_round(folder / self.name, request.round)
            else:
                load_party(self.party, self.name, folder, request.round, str(request.run), own)
                self.seen.forget()
        elif isinstance(request, requests.Prune):
            if self.root is None or self.run is not None:  # on its own root, only the files of the run it serves
                prune_party(self.name, folder, request.round, self.run if self.root is not None else "")
        else:
            raise PermissionError(f"{self.name} does no {request.kind}")
        return Ack(**back)

    def serve(self, request: requests.Save | requests.Load) -> str:
        """The run a Save or Load is for (its stamp's identity): the first after the party was built binds it; one
        for another run is refused (:class:`PermissionError`), so a party writes and reads only the run it serves."""
        try:
            run = run_of(request.run)
        except ValueError as err:
            raise TypeError(str(err)) from None  # a malformed request
        if self.run is None:
            self.run = run
        elif run != self.run:
            raise PermissionError(
                f"{self.name} serves run {self.run}, so it refuses a {request.kind} for run {run} (a party writes and "
                "reads only the run it was set up for)"
            )
        return run

    def where(self) -> dict:
        return party_place(self.name, self.party)


def party_place(name: str, party: Party) -> dict:
    """Where a party runs: this host and process, and the device it trains on (what it says: ``device()``)."""
    return {"name": name, "host": socket.gethostname(), "pid": os.getpid(), "device": str(party.device())}


def checked_party(party) -> Party | None:
    """``party``, if it is a :class:`vcl.family.Party` (or None: not built yet); else one sentence."""
    if party is not None and not isinstance(party, Party):
        raise TypeError(
            f"a family's party must be a vcl.family.Party; {type(party).__name__} is not: derive it from Party."
        )
    return party


class PartyHost:
    """The parties one process hosts, each behind its own :class:`PartyRuntime` (``runtimes``, by name); ``together``:
    the messages to parties of one class are answered by their class's :meth:`vcl.family.Party.handle_batch`."""

    def __init__(self, runtimes: dict[str, PartyRuntime], together: bool = False):
        self.runtimes, self.together = runtimes, together

    def handle_all(self, requests: list[tuple[str, Message]]) -> list[Message | None]:
        """Each party's reply to its message, in the order given (together: where each party is named once and no
        message is the runtime's own)."""
        names = [name for name, _ in requests]
        alone = len(set(names)) < len(names) or any(isinstance(m, RuntimeRequest) for _, m in requests)
        if not self.together or alone:
            return [self.runtimes[name].handle(message) for name, message in requests]
        classes: dict[type, list[int]] = {}  # the requests to parties of each class, in order
        for i, name in enumerate(names):
            classes.setdefault(type(self.runtimes[name].party), []).append(i)
        replies: list[Message | None] = [None] * len(requests)
        for batch in classes.values():
            answered = PartyRuntime.handle_batch([self.runtimes[names[i]] for i in batch],
                                                 [requests[i][1] for i in batch])  # fmt: skip
            for i, reply in zip(batch, answered, strict=True):
                replies[i] = reply
        return replies
