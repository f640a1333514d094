"""Typed messages between organizations and the ledger that counts them: the base :class:`Message`, the
messages any family may use, the coordinator's requests to a party's runtime and the :class:`Channel`; each family's
own messages sit with it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import Tensor


@dataclass(frozen=True)
class Message:
    """Base message: who sends it to whom in which round, and its tensors (``payload``)."""

    sender: str
    receiver: str
    round: int
    # the message's tensors, declared once: payload key → the field that holds it ("*": a field holding a dict of
    # them); a field left None is not sent
    tensors: ClassVar[dict[str, str]] = {}
    # when in the run a message of this kind goes, where not in a round of the protocol ("start-up", "loading")
    stage: ClassVar[str] = ""

    def payload(self) -> dict[str, Tensor]:
        out = {}
        for key, name in self.tensors.items():
            value = getattr(self, name)
            if key == "*":
                out.update({k: v for k, v in value.items() if isinstance(v, Tensor)})
            elif value is not None:
                out[key] = value
        return out

    @property
    def kind(self) -> str:
        return type(self).__name__

    @property
    def during(self) -> str:
        """When in the run it is sent, for a sentence about a party that did not answer it."""
        return self.stage or f"round {self.round}"


@dataclass(frozen=True)
class ValuesMessage(Message):
    """A message whose content is one tensor, ``values``; each kind names it in the ledger (its ``tensors``)."""

    values: Tensor = field(repr=False)


@dataclass(frozen=True)
class Labels(Message):
    """The training targets themselves: Alice → organization in the centralized baselines (one-hot, each round,
    with the task's ``loss``), a DC worker → the master (its row group's Y_i), or ASCII's class indices, once, in the
    smallest integer type that holds K."""

    values: Tensor = field(repr=False)
    loss: str | None = None

    tensors = {"train": "values"}


@dataclass(frozen=True)
class Ack(Message):
    """A party → the coordinator: a message that asks for nothing back (ASCII's labels, a :class:`Step`) is
    done; ``figures``: numbers about the sender's own work (a row count), if asked for. No tensor."""

    figures: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Step(Message):
    """The coordinator → a party: do ``step`` of the protocol (``args``: which one, e.g. an epoch and a batch
    of a schedule both sides draw from the run's seed), and answer. No tensor."""

    step: str = ""
    args: dict = field(default_factory=dict)


# --- what the coordinator asks of a party's runtime, not of the party: its own files, its state, where it runs ---
@dataclass(frozen=True)
class RuntimeRequest(Message):
    """The coordinator → a party's runtime (:class:`vcl.party.runtime.PartyRuntime`), which answers it itself: the
    party's own files and state. Its protocol never sees it, no other party may send it, and it is not in the ledger.
    ``root``: the run's folder of the parties' own files (a party on its own machine keeps its own)."""

    root: str = ""


@dataclass(frozen=True)
class OpenLogs(RuntimeRequest):
    """Keep your logs under ``root/<name>/`` from now on; answered by an :class:`Ack`. ``keep_messages``: keep every
    message you receive and send beside your checkpoints too, at most ``keep_rows`` rows of each (0: every row)."""

    keep_messages: bool = False
    keep_rows: int = 0

    stage = "start-up"


@dataclass(frozen=True)
class Save(RuntimeRequest):
    """Write your checkpoint of ``round`` (stamped with ``run``, the run's identity), then that round's log line."""

    run: str = ""


@dataclass(frozen=True)
class Load(RuntimeRequest):
    """Read back your checkpoint of ``round``, refusing one of another ``run``."""

    run: str = ""

    stage = "loading"


@dataclass(frozen=True)
class Prune(RuntimeRequest):
    """Remove your checkpoints of rounds before ``round`` (only behind one you hold)."""


@dataclass(frozen=True)
class Where(RuntimeRequest):
    """Say where you run: answered by a :class:`Placed`."""

    stage = "start-up"


@dataclass(frozen=True)
class Placed(Message):
    """A party's runtime → the coordinator: ``place``, its host, process ID and device."""

    place: dict = field(default_factory=dict)


@dataclass(frozen=True)
class StateRequest(RuntimeRequest):
    """Send your whole state (a run without a run directory keeps the parties' states in the coordinator's; only
    where the parties run in the coordinator's process): answered by a :class:`PartyState`."""


@dataclass(frozen=True)
class PartyState(Message):
    """A party's runtime → the coordinator: its ``state`` (its ``state_dict``)."""

    state: dict = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class LoadState(RuntimeRequest):
    """Take ``state`` back (what a :class:`PartyState` held)."""

    state: dict = field(default_factory=dict, repr=False)

    stage = "loading"


@dataclass
class MessageRecord:
    round: int
    kind: str
    sender: str
    receiver: str
    shapes: dict[str, list[int]]
    nbytes: int


def record_of(message: Message) -> MessageRecord:
    """The ledger's line for a message: its kind, ends, round, tensor shapes and bytes."""
    shapes, nbytes = {}, 0
    for key, tensor in message.payload().items():  # one pass: a round writes two lines per organization
        shapes[key] = list(tensor.shape)
        nbytes += tensor.nbytes
    return MessageRecord(message.round, message.kind, message.sender, message.receiver, shapes, nbytes)


class Channel:
    """The ledger: records every message that crosses (its kind, shapes and bytes per round). ``send`` records a
    message and returns ``tap(message)``. Messages an organization sends itself, and those to or from a party
    ``outside`` the protocol (:attr:`vcl.family.Family.outside`), are recorded but not counted as communication."""

    def __init__(self, tap: Callable[[Message], Message] | None = None, outside: tuple[str, ...] = ()):
        self.tap = tap or (lambda message: message)
        self.outside = frozenset(outside)
        self.records: list[MessageRecord] = []
        self._crossed: dict[tuple[int, str], int] = defaultdict(int)  # bytes that crossed, per (round, kind)

    def send(self, message: Message) -> Message:
        self.add(record_of(message))
        return self.tap(message)

    def add(self, record: MessageRecord) -> None:
        """Count a message the transport carried without this process holding it (party to party)."""
        self.records.append(record)
        if record.sender != record.receiver and not {record.sender, record.receiver} & self.outside:
            self._crossed[(record.round, record.kind)] += record.nbytes

    def bytes_by_round(self, kinds: tuple[str, ...] | None = None) -> dict[int, int]:
        """Bytes that crossed a boundary per round; ``kinds`` restricts to those message types."""
        out: dict[int, int] = defaultdict(int)
        for (round_, kind), nbytes in self._crossed.items():
            if kinds is None or kind in kinds:
                out[round_] += nbytes
        return dict(out)

    def bytes_by_kind(self, round_: int) -> dict[str, int]:
        """Bytes that crossed a boundary in ``round_``, per message type."""
        return {kind: nbytes for (r, kind), nbytes in self._crossed.items() if r == round_}

    def total_bytes(self, kinds: tuple[str, ...] | None = None) -> int:
        return sum(self.bytes_by_round(kinds).values())

    def state_dict(self) -> dict:
        return {"records": [vars(r).copy() for r in self.records]}

    def load_state_dict(self, state: dict) -> None:
        self.records, self._crossed = [], defaultdict(int)
        for r in state["records"]:
            self.add(MessageRecord(**r))


def as_float(t: Tensor) -> Tensor:
    """Messages carry float32 tensors, detached from any autograd graph."""
    return t.detach().to(torch.float32)


def as_classes(t: Tensor, num_classes: int) -> Tensor:
    """Class indices in the smallest integer type that holds ``num_classes`` (uint8 up to 256)."""
    return t.detach().to(torch.uint8 if num_classes <= 256 else torch.int32)
