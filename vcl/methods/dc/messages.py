"""DC's messages: between the workers, to the master, and to and from the experimenter."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from vcl.messages import Message, ValuesMessage


# --- the messages of this protocol step (each declares its tensors once; see vcl.messages) ---
@dataclass(frozen=True)
class AnchorShare(Message):
    """DC worker → worker: its part of the shared anchor data (column ranges for DC(rand), a perturbed low-rank
    approximation for DC(TSVD), raw rows for DC(raw); DC(SMOTE) needs none), with its place (i, j) in the grid."""

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
class AnchorPredictions(ValuesMessage):
    """DC master → worker: the central model's outputs on its row group's anchor representation,
    Y_i^anc = h(X̃_i^anc G_i) (r × K) — Algorithm 1 step 11."""

    tensors = {"anchor": "values"}


@dataclass(frozen=True)
class RawFeatures(ValuesMessage):
    """Worker → master: its private rows themselves. Only DC's Centralized reference sends them."""

    tensors = {"train": "values"}


# --- the DC messages to and from the experimenter ----------------------------------------------------
@dataclass(frozen=True)
class KeptModel(Message):
    """A worker (or the master) → the experimenter: the interpretable model it keeps (skops bytes), the global
    columns it reads, its place in the grid, and the anchors it built — to be scored outside the protocol."""

    model: Tensor = field(repr=False)
    columns: tuple[int, ...] = ()
    position: tuple[int, int] | None = None
    anchor: Tensor | None = field(repr=False, default=None)

    tensors = {"model": "model", "anchor": "anchor"}


@dataclass(frozen=True)
class ScoreRequest(Message):
    """Master → the experimenter: score the models kept by ``models`` (in that order). ``collab``: the central
    model's class scores of each row group's test rows (c × n_test × K), for the collaboration accuracy;
    ``local_train``: answer the Local reference's training-row scores too."""

    models: tuple[str, ...] = ()
    collab: Tensor | None = field(repr=False, default=None)
    local_train: bool = False

    tensors = {"collab": "collab"}


@dataclass(frozen=True)
class Scores(Message):
    """The experimenter → master: accuracy per split, the paper's scores, and (Local) the training scores."""

    split_metrics: dict[str, float] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    train: Tensor | None = field(repr=False, default=None)

    tensors = {"train": "train"}
