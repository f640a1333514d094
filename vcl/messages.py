"""Typed messages between organizations and the ledger that counts them.

Everything that leaves an organization is one of these messages. The :class:`Channel` records every
message's type, shapes and size per round, so a run reports its communication cost; a
:class:`vcl.transport.Transport` delivers messages to parties and counts each message and reply in it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import Tensor

EXPERIMENTER = "experimenter"  # who scores a run from its own full view of the data; outside the protocol


@dataclass(frozen=True)
class Message:
    """Base message: who sends it to whom in which round, and its tensors (``payload``)."""

    sender: str
    receiver: str
    round: int
    # the message's tensors, declared once: payload key → the field that holds it ("*": a field holding a dict of
    # them); a field left None is not sent
    tensors: ClassVar[dict[str, str]] = {}

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


@dataclass(frozen=True)
class PseudoResidual(Message):
    """Alice → organization: the pseudo-residual ``r^t`` on the training rows (N × K)."""

    values: Tensor = field(repr=False)

    tensors = {"train": "values"}


@dataclass(frozen=True)
class Labels(Message):
    """The training targets themselves: Alice → organization in the centralized baselines, or a DC worker
    → the master (its row group's Y_i, Algorithm 1 step 4).

    The centralized baselines (Late) send one-hot targets each round, with the task's ``loss`` to fit them
    with; ASCII sends the class indices once, in the smallest integer type that holds K (the paper's
    "numerical labels").
    """

    values: Tensor = field(repr=False)
    loss: str | None = None

    tensors = {"train": "values"}


@dataclass(frozen=True)
class PredictionRequest(Message):
    """Alice → organization: predict the rows of ``split`` (the organization's own) with every round model."""

    split: str = "test"


@dataclass(frozen=True)
class FittedValues(Message):
    """Organization → Alice: model outputs on its rows ({split: N × K}, or {round: N × K} for a prediction)."""

    values: dict[str, Tensor] = field(repr=False)

    tensors = {"*": "values"}


@dataclass(frozen=True)
class ModelsRequest(Message):
    """Alice → organization: describe the models you keep for the prediction stage (for the run's report)."""


@dataclass(frozen=True)
class ModelsReport(Message):
    """Organization → Alice: how many models it keeps, their torch parameters (a shared extractor counted
    once), and whether its rounds share one extractor (Deep Model Sharing). Counts, no tensor."""

    models: int = 0
    parameters: int = 0
    shared: bool = False


@dataclass(frozen=True)
class IgnoranceScores(Message):
    """ASCII, agent → next agent in the chain: the ignorance scores ``w`` (length N, sum one; eqs 10, 12) and
    the model weights α of the agents before it in the round, the sender's included (with ``ascii.alpha=paper``
    only: ASCII-Simple and the exact α send none).

    ``round_start`` (the scores the round began from) rides along, with ``ascii_alpha=paper``, only to an
    agent that cannot know it, i.e. past the second hop of a chain of more than two agents: eq. 13's joint
    factor for the preceding agents of the round is ``scores / round_start``, which two agents get from the
    scores alone.
    """

    scores: Tensor = field(repr=False)
    alphas: Tensor = field(repr=False)
    round_start: Tensor | None = field(repr=False, default=None)

    tensors = {"scores": "scores", "alphas": "alphas", "round_start": "round_start"}


@dataclass(frozen=True)
class ClassVotes(Message):
    """ASCII, agent → Alice: predicted classes of its classifiers and their model weights α.

    After a round: ``alphas`` (1,) and ``classes`` {split: N} on the agent's rows of every split. In the
    prediction stage: ``alphas`` (T,) and ``classes`` {round: N} for each round model. Alice forms the
    SAMME-coded vote ``Σ α g`` (Algorithm 1, line 12) from them; no feature leaves the agent.
    """

    alphas: Tensor = field(repr=False)
    classes: dict[str, Tensor] = field(repr=False)

    tensors = {"alphas": "alphas", "*": "classes"}


@dataclass(frozen=True)
class Interchange(Message):
    """ASCII, Alice → agent: take your hop of round ``round`` (Algorithm 1, lines 3–10) on the ignorance scores
    the transport delivered to you, and pass yours on to ``next``. Public facts only, no tensor: the agent's
    place in the round's order (``position`` 0 starts the round), whether ``next`` is in this round (False on
    the last hop: the scores start the next round), whether ``next`` knows the round's start scores, whether α
    is the paper's joint one (``ascii.alpha=paper``, the α's travel on), and the seed of the agent's model."""

    position: int = 0
    next: str = ""
    next_in_round: bool = True
    next_knows_start: bool = True
    joint: bool = False
    seed: int = 0


@dataclass(frozen=True)
class Discarded(Message):
    """ASCII, agent → Alice: its model's α ≤ 0, so the model is discarded and passes nothing on (Algorithm 1,
    lines 5 and 8); ``alpha`` is the number itself. No tensor."""

    alpha: float = 0.0


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


@dataclass(frozen=True)
class Scalars(Message):
    """A few numbers as a tensor: an organization's gradient norms, or the whole network's norm it clips by
    (Interm fusion's clip over every part of one network)."""

    values: Tensor = field(repr=False)

    tensors = {"values": "values"}


@dataclass(frozen=True)
class Report(Message):
    """A party (or the coordinator) → the experimenter: what it holds that the run's scores need (the models
    it keeps, what it received). Outside the protocol: recorded, never counted as communication."""

    values: dict = field(repr=False)

    tensors = {"*": "values"}  # its tensors; the rest (counts, row indices) rides along uncounted


@dataclass(frozen=True)
class AnchorShare(Message):
    """DC worker → worker: its contribution to the shared anchor data (column ranges for DC(rand), a
    perturbed low-rank approximation for DC(TSVD), raw rows for DC(raw); DC(SMOTE) needs none), with the
    sender's place (i, j) in the grid."""

    values: dict[str, Tensor] = field(repr=False)
    position: tuple[int, int] = (0, 0)

    tensors = {"*": "values"}


@dataclass(frozen=True)
class ReducedRepresentation(Message):
    """DC worker → master: dimensionality-reduced intermediate representations f_ij(·) of its private
    rows ({"train", "test"}) and of the anchor data ("anchor") — Algorithm 1 step 4."""

    values: dict[str, Tensor] = field(repr=False)

    tensors = {"*": "values"}


@dataclass(frozen=True)
class AnchorPredictions(Message):
    """DC master → worker: the central model's outputs on its row group's anchor representation,
    Y_i^anc = h(X̃_i^anc G_i) (r × K) — Algorithm 1 step 11."""

    values: Tensor = field(repr=False)

    tensors = {"anchor": "values"}


@dataclass(frozen=True)
class RawFeatures(Message):
    """Worker → master: its private rows themselves. Only DC's Centralized reference sends them."""

    values: Tensor = field(repr=False)

    tensors = {"train": "values"}


@dataclass(frozen=True)
class BlindedIDs(Message):
    """MPDL PSI (:mod:`vcl.psi`): row IDs hashed into a group and blinded by secret exponents, one
    group element per row as big-endian bytes (N × bytes(p), uint8). No raw or merely hashed ID."""

    values: Tensor = field(repr=False)

    tensors = {"blinded": "values"}


@dataclass(frozen=True)
class IntersectionIndices(Message):
    """MPDL PSI, A → B: positions in B's shuffled blinded list of the rows both hold, in A's row order."""

    values: Tensor = field(repr=False)

    tensors = {"positions": "values"}


@dataclass(frozen=True)
class FoldAssignment(Message):
    """MPDL, B → A: the fold (0..K−1) of each aligned co-occurring row (Algorithm 1's K shares of D_C)."""

    values: Tensor = field(repr=False)

    tensors = {"fold": "values"}


@dataclass(frozen=True)
class PublicKey(Message):
    """MPDL, a party's Paillier public modulus n as big-endian bytes (uint8)."""

    values: Tensor = field(repr=False)

    tensors = {"n": "values"}


@dataclass(frozen=True)
class PerturbedMeans(Message):
    """MPDL: a party's column means of its h₀ outputs (eq. 14's φ_j/L). Computed from h₀'s outputs alone, so
    under per-row DP they spend no further budget (post-processing). The other party's dual model generates
    around them (its output shift)."""

    values: Tensor = field(repr=False)

    tensors = {"means": "values"}


@dataclass(frozen=True)
class GeneratedData(Message):
    """MPDL: a dual model's output — the sender's estimate of the receiver's (perturbed) features of the
    rows named by the protocol (co-occurring minibatch, B-only rows, A-only rows), N × d_receiver."""

    values: Tensor = field(repr=False)
    rows: str = "overlap"  # "overlap": a minibatch of D_C; "only": the sender's rows the receiver does not hold

    tensors = {"generated": "values"}


@dataclass(frozen=True)
class OutputGradient(Message):
    """MPDL Algorithm 2: the plaintext part of the gradient w.r.t. the generated data the receiver sent,
    ∇ℓ_align + λ∇log P(x̂)·(log P(x̂) − log P(x)) (N × d_sender)."""

    values: Tensor = field(repr=False)

    tensors = {"gradient": "values"}


@dataclass(frozen=True)
class DensityDifference(Message):
    """MPDL Algorithm 2: the sender's log P(x̂) − log P(x) per row, under its own Paillier key
    (``ciphertexts`` N × bytes, ``exponents`` N) or, with encryption off, in plaintext (``values``)."""

    values: Tensor | None = field(repr=False, default=None)
    ciphertexts: Tensor | None = field(repr=False, default=None)
    exponents: Tensor | None = field(repr=False, default=None)

    tensors = {"values": "values", "ciphertexts": "ciphertexts", "exponents": "exponents"}  # plaintext, or encrypted


@dataclass(frozen=True)
class CrossGradient(Message):
    """MPDL Algorithm 2: λ∇log P(x̂)·[[log P(x) − log P(x̂)]] of the receiver's density difference, still
    under the receiver's key (N·d ciphertexts), or in plaintext with encryption off (N × d)."""

    values: Tensor | None = field(repr=False, default=None)
    ciphertexts: Tensor | None = field(repr=False, default=None)
    exponents: Tensor | None = field(repr=False, default=None)

    tensors = {"values": "values", "ciphertexts": "ciphertexts", "exponents": "exponents"}  # plaintext, or encrypted


@dataclass(frozen=True)
class Activations(Message):
    """Split network (MPDL Section III-C3, FTL): a party's bottom-layer outputs z = x·W (or its shared
    representation) on a minibatch, party → collaborator."""

    values: Tensor = field(repr=False)

    tensors = {"activations": "values"}


@dataclass(frozen=True)
class ActivationGradient(Message):
    """Split network: the errors δ of the collaborator's first layer w.r.t. a party's activations (eq. 18)."""

    values: Tensor = field(repr=False)

    tensors = {"gradient": "values"}


def _nbytes(t: Tensor) -> int:
    return t.numel() * t.element_size()


@dataclass
class MessageRecord:
    round: int
    kind: str
    sender: str
    receiver: str
    shapes: dict[str, list[int]]
    nbytes: int

    @property
    def crosses_boundary(self) -> bool:
        """Communication between parties: not a message to oneself, nor one to or from the experimenter
        (who scores the run from outside the protocol)."""
        return self.sender != self.receiver and EXPERIMENTER not in (self.sender, self.receiver)


def record_of(message: Message) -> MessageRecord:
    """The ledger's line for a message: its kind, ends, round, tensor shapes and bytes."""
    payload = message.payload()
    return MessageRecord(
        round=message.round,
        kind=message.kind,
        sender=message.sender,
        receiver=message.receiver,
        shapes={k: list(v.shape) for k, v in payload.items()},
        nbytes=sum(_nbytes(v) for v in payload.values()),
    )


class Channel:
    """The ledger: records every message that crosses (its kind, shapes and bytes per round).

    ``send`` records a message and returns what the receiver gets: ``tap(message)``, the identity unless a
    test taps the ledger to see (or alter) what crosses (parties are reached through a
    :class:`vcl.transport.Transport`, which sends every message and reply through here). Messages an
    organization sends to itself, and the experimenter's messages, are recorded but not counted as
    communication.
    """

    def __init__(self, tap: Callable[[Message], Message] | None = None):
        self.tap = tap or (lambda message: message)
        self.records: list[MessageRecord] = []

    def send(self, message: Message) -> Message:
        self.records.append(record_of(message))
        return self.tap(message)

    def add(self, record: MessageRecord) -> None:
        """Count a message the transport carried without this process holding it (party to party)."""
        self.records.append(record)

    def bytes_by_round(self, kinds: tuple[str, ...] | None = None) -> dict[int, int]:
        """Bytes that crossed a boundary per round; ``kinds`` restricts to those message types."""
        out: dict[int, int] = defaultdict(int)
        for r in self.records:
            if r.crosses_boundary and (kinds is None or r.kind in kinds):
                out[r.round] += r.nbytes
        return dict(out)

    def bytes_by_kind(self, round_: int) -> dict[str, int]:
        """Bytes that crossed a boundary in ``round_``, per message type."""
        out: dict[str, int] = defaultdict(int)
        for r in self.records:
            if r.round == round_ and r.crosses_boundary:
                out[r.kind] += r.nbytes
        return dict(out)

    def total_bytes(self, kinds: tuple[str, ...] | None = None) -> int:
        return sum(self.bytes_by_round(kinds).values())

    def state_dict(self) -> dict:
        return {"records": [vars(r).copy() for r in self.records]}

    def load_state_dict(self, state: dict) -> None:
        self.records = [MessageRecord(**r) for r in state["records"]]


def as_float(t: Tensor) -> Tensor:
    """Messages carry float32 tensors, detached from any autograd graph."""
    return t.detach().to(torch.float32)


def as_classes(t: Tensor, num_classes: int) -> Tensor:
    """Class indices in the smallest integer type that holds ``num_classes`` (uint8 up to 256)."""
    return t.detach().to(torch.uint8 if num_classes <= 256 else torch.int32)
